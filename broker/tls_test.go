package broker

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/weirhq/weir/internal/testcerts"
)

// countingConn records the size of every Write that reaches the socket
// and fails them once fail is set.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes []int
	fail   bool
}

var errWireBroken = errors.New("wire broken")

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	fail := c.fail
	if !fail {
		c.writes = append(c.writes, len(p))
	}
	c.mu.Unlock()
	if fail {
		return 0, errWireBroken
	}
	return c.Conn.Write(p)
}

func (c *countingConn) take() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// tlsPair is a handshaken TLS connection over a pipe: the server side on
// the broker's tlsWire over a countingConn, and the client.
func tlsPair(t *testing.T) (server *tls.Conn, wire *tlsWire, counted *countingConn, client *tls.Conn) {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir)
	srv := ca.Server("server")
	cert, err := tls.LoadX509KeyPair(srv.CertFile, srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	sc, cc := net.Pipe()
	t.Cleanup(func() { sc.Close(); cc.Close() })
	counted = &countingConn{Conn: sc}
	wire = newTLSWire(counted)
	server = tls.Server(wire, &tls.Config{Certificates: []tls.Certificate{cert}, DynamicRecordSizingDisabled: true})
	ccfg := ca.ClientTLS(nil)
	ccfg.ServerName = "localhost"
	client = tls.Client(cc, ccfg)
	_ = sc.SetDeadline(time.Now().Add(10 * time.Second))
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	hs := make(chan error, 1)
	go func() { hs <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	return server, wire, counted, client
}

// readAll reads n bytes from the client in the background.
func readAll(c *tls.Conn, n int) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			out <- nil
			return
		}
		out <- buf
	}()
	return out
}

// A response written while the wire is corked reaches the socket in
// writes of at least tlsWriteChunk (the last one excepted), not one per
// 16 KiB TLS record as without corking; the client decrypts it intact.
func TestTLSWireGathersRecords(t *testing.T) {
	server, wire, counted, client := tlsPair(t)
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i*31 + i>>9)
	}
	counted.take() // the handshake's writes

	// Uncorked: the TLS layer's own pattern, a write per record.
	got := readAll(client, len(payload))
	if _, err := server.Write(payload); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, payload) {
		t.Fatal("uncorked payload corrupted")
	}
	if w := counted.take(); len(w) < len(payload)/(16<<10) {
		t.Fatalf("uncorked: %d socket writes, want one per record (>= %d)", len(w), len(payload)/(16<<10))
	}

	// Corked: gathered.
	got = readAll(client, 2*len(payload))
	wire.cork()
	for range 2 {
		if _, err := server.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := wire.uncork(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b[:len(payload)], payload) || !bytes.Equal(b[len(payload):], payload) {
		t.Fatal("corked payload corrupted")
	}
	w := counted.take()
	if max := 2*len(payload)/tlsWriteChunk + 1; len(w) > max {
		t.Fatalf("corked: %d socket writes %v, want at most %d", len(w), w, max)
	}
	for i, n := range w[:len(w)-1] {
		if n < tlsWriteChunk {
			t.Fatalf("corked write %d is %d bytes, want >= %d (all: %v)", i, n, tlsWriteChunk, w)
		}
	}

	// After uncork, writes pass straight through again (a small one is
	// on the socket before Write returns).
	got = readAll(client, 5)
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if w := counted.take(); len(w) != 1 {
		t.Fatalf("after uncork: %d socket writes, want 1", len(w))
	}
	if b := <-got; string(b) != "hello" {
		t.Fatalf("read %q", b)
	}
}

// A socket write that fails while corked is reported by uncork (the TLS
// layer was told its records were written) and by every later write.
func TestTLSWireWriteErrorSticks(t *testing.T) {
	server, wire, counted, _ := tlsPair(t)
	counted.mu.Lock()
	counted.fail = true
	counted.mu.Unlock()
	wire.cork()
	if _, err := server.Write([]byte("buffered, not yet written")); err != nil {
		t.Fatalf("corked write failed before the flush: %v", err)
	}
	if err := wire.uncork(); !errors.Is(err, errWireBroken) {
		t.Fatalf("uncork = %v, want the socket's error", err)
	}
	if _, err := server.Write([]byte("x")); err == nil {
		t.Fatal("write after a failed flush succeeded")
	}
	wire.cork()
	if err := wire.uncork(); !errors.Is(err, errWireBroken) {
		t.Fatalf("second uncork = %v, want the socket's error", err)
	}
}

// The SSL listener negotiates AES-128-GCM, the cheapest suite where the
// CPU has AES and carry-less multiply instructions (ChaCha20-Poly1305
// elsewhere), for TLS 1.3 and TLS 1.2 clients alike.
func TestTLSCipherSuite(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir)
	srv := ca.Server("server")
	b, _ := testBroker(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:0", Protocol: SSL}}
		c.TLS = TLSConfig{CertFile: srv.CertFile, KeyFile: srv.KeyFile}
	})
	aesHW := (runtime.GOARCH == "amd64" && cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ) ||
		(runtime.GOARCH == "arm64" && cpu.ARM64.HasAES && cpu.ARM64.HasPMULL)
	for _, tc := range []struct {
		version     uint16
		aes, noAES  uint16
		versionName string
	}{
		{tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, tls.TLS_CHACHA20_POLY1305_SHA256, "1.3"},
		{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, "1.2"},
	} {
		cfg := ca.ClientTLS(nil)
		cfg.MaxVersion = tc.version
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.ListenerAddr("SSL"), cfg)
		if err != nil {
			t.Fatalf("TLS %s: %v", tc.versionName, err)
		}
		st := c.ConnectionState()
		c.Close()
		want := tc.noAES
		if aesHW {
			want = tc.aes
		}
		if st.Version != tc.version || st.CipherSuite != want {
			t.Errorf("TLS %s: negotiated %s with %s, want %s (AES hardware: %v)", tc.versionName,
				tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), tls.CipherSuiteName(want), aesHW)
		}
	}
}

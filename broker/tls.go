package broker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// TLS for SSL and SASL_SSL listeners: the server certificate and key, and
// optionally a client CA bundle for mutual TLS, are PEM files read at
// Start and read again when any of them changes (checked at most once per
// second, on new connections), so certificates rotate without a restart;
// a change that does not load (a half-written file, a key that does not
// match) keeps the previous configuration and is logged. TLS 1.2 is the
// minimum; everything else is Go's defaults (cipher suites, curves): with
// AES hardware Go negotiates AES-128-GCM first for TLS 1.3 and 1.2 alike,
// with franz-go and with OpenSSL-based clients such as librdkafka
// (TestTLSCipherSuite; docs/bench/tls.md), the cheapest suite.
//
// What TLS costs the broker (docs/bench/tls.md, issue 20): on produce, the
// decryption and one more copy of each request are small next to the append
// (1.1-1.6x PLAINTEXT, within 1.5x in four runs of six). On consume they
// are not: a PLAINTEXT Fetch writes the record sets from the log buffers
// with one writev, while over TLS crypto/tls copies each record set into
// its record buffer and seals it there (Go 1.26's AES-GCM uses 128-bit
// AES-NI, no VAES: about 0.19 CPU-s/GB, BenchmarkGCMSealFloor), and the
// kernel has no kTLS to take that over. The cipher alone is about half of
// PLAINTEXT consume's CPU, and the copy inside crypto/tls (which the broker
// cannot avoid through its API; it reads the log buffers cold) two thirds
// of the cipher again: consume costs about 2x PLAINTEXT. tlsWire removes
// the rest that the broker controls.
//
// Client certificates are asked for on SSL listeners only: on SASL_SSL the
// client proves who it is with SASL (Kafka since KIP-684 ignores
// ssl.client.auth there unless set for that listener).
//
// With client certificates verified (mTLS), the principal of an SSL
// connection is "User:" plus the certificate subject's distinguished name
// in RFC 2253 form ("User:CN=alice,O=Acme"), as Kafka's default principal
// builder; without one it is User:ANONYMOUS. On SASL_SSL the principal
// comes from SASL.

// TLSConfig configures TLS for the SSL and SASL_SSL listeners.
type TLSConfig struct {
	// CertFile and KeyFile are the server's PEM certificate (chain) and
	// private key.
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of CAs client certificates are
	// verified against; empty: no client certificates.
	ClientCAFile string
	// ClientAuth is Kafka's ssl.client.auth: "required" (the default
	// when ClientCAFile is set), "requested" (verified when presented) or
	// "none".
	ClientAuth string
}

// clientAuthType maps ClientAuth to Go's setting.
func (c TLSConfig) clientAuthType() (tls.ClientAuthType, error) {
	mode := c.ClientAuth
	if mode == "" {
		mode = "none"
		if c.ClientCAFile != "" {
			mode = "required"
		}
	}
	switch mode {
	case "none":
		return tls.NoClientCert, nil
	case "requested":
		if c.ClientCAFile == "" {
			return 0, errors.New("tls: ClientAuth requested needs ClientCAFile")
		}
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		if c.ClientCAFile == "" {
			return 0, errors.New("tls: ClientAuth required needs ClientCAFile")
		}
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("tls: ClientAuth %q: want none, requested or required", c.ClientAuth)
}

// tlsReloader serves the current TLS configuration, reloading it when its
// files change. Safe for concurrent use.
type tlsReloader struct {
	cfg    TLSConfig
	auth   tls.ClientAuthType
	logger interface {
		Warn(msg string, args ...any)
		Info(msg string, args ...any)
	}

	mu      sync.Mutex
	current *tls.Config // for SSL listeners
	noAuth  *tls.Config // current without client certificates (SASL_SSL)
	stamp   []byte      // the files' sizes and modification times
	checked time.Time
}

func newTLSReloader(cfg TLSConfig, b *Broker) (*tlsReloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: a TLS listener needs CertFile and KeyFile")
	}
	auth, err := cfg.clientAuthType()
	if err != nil {
		return nil, err
	}
	r := &tlsReloader{cfg: cfg, auth: auth, logger: b.logger}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	cur, err := r.load()
	if err != nil {
		return nil, err
	}
	r.install(cur)
	r.stamp, r.checked = stamp, time.Now()
	return r, nil
}

func (r *tlsReloader) files() []string {
	f := []string{r.cfg.CertFile, r.cfg.KeyFile}
	if r.cfg.ClientCAFile != "" {
		f = append(f, r.cfg.ClientCAFile)
	}
	return f
}

func (r *tlsReloader) fileStamp() ([]byte, error) {
	var b []byte
	for _, f := range r.files() {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		b = fmt.Appendf(b, "%s %d %d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b, nil
}

func (r *tlsReloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		// The error names the files and what is wrong with the PEM,
		// never the key material.
		return nil, fmt.Errorf("tls: load %s / %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   r.auth,
		// Small first records help a browser render early; a Kafka
		// client reads whole responses, and the write loop gathers
		// records into large writes anyway (tlsWire).
		DynamicRecordSizingDisabled: true,
	}
	if r.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(r.cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", r.cfg.ClientCAFile)
		}
		c.ClientCAs = pool
	}
	return c, nil
}

// install makes c current. mu must be held (or r not yet shared).
func (r *tlsReloader) install(c *tls.Config) {
	r.current = c
	r.noAuth = c.Clone()
	r.noAuth.ClientAuth, r.noAuth.ClientCAs = tls.NoClientCert, nil
}

// config returns the configuration for a new connection (with client
// certificates as configured when clientAuth, else without), reloading
// it first if a file changed.
func (r *tlsReloader) config(clientAuth bool) *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= time.Second {
		r.checked = time.Now()
		if stamp, err := r.fileStamp(); err == nil && !bytes.Equal(stamp, r.stamp) {
			if next, err := r.load(); err != nil {
				// Files being rewritten one after the other: try
				// again on the next check rather than keep the
				// half-new state.
				r.logger.Warn("tls: files changed but do not load; keeping the previous certificate", "err", err)
			} else {
				r.install(next)
				r.stamp = stamp
				r.logger.Info("tls: certificate reloaded", "cert", r.cfg.CertFile)
			}
		}
	}
	if clientAuth {
		return r.current
	}
	return r.noAuth
}

// serverConfig is the listener-level tls.Config: every handshake asks
// the reloader for the current one. clientAuth: the listener verifies
// client certificates as configured (SSL listeners).
func (r *tlsReloader) serverConfig(clientAuth bool) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.config(clientAuth), nil },
	}
}

// tlsHandshakeTimeout bounds a TLS handshake; a client that connects and
// says nothing is dropped after it.
const tlsHandshakeTimeout = 10 * time.Second

// handshake completes the TLS handshake of a TLS connection and sets the
// connection's principal from a verified client certificate on SSL
// listeners. It returns false (the connection is then closed) on failure.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			c.logger.Info("tls handshake failed", "err", err)
		}
		c.b.metrics.authentications.WithLabelValues("TLS", "failure").Inc()
		return false
	}
	c.wire, _ = tc.NetConn().(*tlsWire)
	st := tc.ConnectionState()
	if c.lis != nil && c.lis.Protocol == SSL && len(st.VerifiedChains) > 0 {
		c.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	return true
}

// writeTLSBuffers writes a vectored response over TLS. Each Write of a
// tls.Conn ends a record, so writing the buffers one by one would make a
// record (and an AEAD seal) per length prefix: small buffers are gathered,
// and a large one (a record set) is written as it is, which the TLS layer
// cuts into full records without a copy of ours. Write loop only.
func (c *conn) writeTLSBuffers(bufs net.Buffers) (int64, error) {
	var n int64
	small := c.tlsSmall[:0]
	flush := func() error {
		if len(small) == 0 {
			return nil
		}
		m, err := c.nc.Write(small)
		n += int64(m)
		small = small[:0]
		return err
	}
	for _, b := range bufs {
		if len(b) < tlsDirectMin {
			small = append(small, b...)
			continue
		}
		if err := flush(); err != nil {
			return n, err
		}
		m, err := c.nc.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	err := flush()
	if cap(small) <= 64<<10 {
		c.tlsSmall = small[:0]
	}
	return n, err
}

// tlsDirectMin: buffers at least this large are written without being
// gathered (a full TLS record).
const tlsDirectMin = 16 << 10

// tlsWire is the TCP connection under a TLS connection.
//
// Reads are buffered: the TLS layer reads a record at a time (at most
// 16 KiB), and through the buffer a large produce request costs one read
// syscall per tlsReadChunk rather than one per record.
//
// Writes pass straight through (handshake flights, alerts, close_notify),
// except while the connection's write loop has the wire corked around one
// response: then the TLS layer's records, which it writes one Write (one
// syscall, one TCP segment with Nagle off) per 16 KiB record, are gathered
// and go to the socket in writes of about tlsWriteChunk, as a plaintext
// response's writev does. The gathering costs a copy of the ciphertext
// through a cache-resident buffer (about 0.02 CPU-s/GB) and saves three
// syscalls in four: the write path's CPU drops by 0.14-0.19 CPU-s/GB
// (BenchmarkFetchWriteCPU, tls vs tls-uncorked, with a decrypting
// reader). Larger chunks do not help: 256 KiB and 1 MiB were no better
// in BenchmarkFetchWriteCPU, and 256 KiB was 8-16% worse in brokerbench
// --tls-compare's consume ratio (2026-12-02, alternating builds).
//
// Goroutine safety: the TLS layer serializes its own writes, but a
// post-handshake message it sends from the read side (a TLS 1.3 KeyUpdate
// reply) may race with the write loop's cork and flush, so mu guards the
// write state. A write error is sticky: every later Write and flush
// returns it, so the TLS layer and the write loop both see the failure of
// a gathered write they were told had succeeded.
type tlsWire struct {
	net.Conn
	r *bufio.Reader

	mu     sync.Mutex
	corked bool
	out    *[]byte // gathered records while corked (from tlsWirePool)
	err    error
}

func newTLSWire(nc net.Conn) *tlsWire {
	return &tlsWire{Conn: nc, r: bufio.NewReaderSize(nc, tlsReadChunk)}
}

func (w *tlsWire) Read(p []byte) (int, error) { return w.r.Read(p) }

func (w *tlsWire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if !w.corked {
		n, err := w.Conn.Write(p)
		w.err = err
		return n, err
	}
	out := append(*w.out, p...)
	*w.out = out
	if len(out) >= tlsWriteChunk {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// cork starts gathering writes. Write loop only; uncork ends it.
func (w *tlsWire) cork() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.corked = true
	if w.out == nil {
		w.out = tlsWirePool.Get().(*[]byte)
	}
}

// uncork writes what was gathered, stops gathering and gives the buffer
// back. It returns the first write error since the wire was corked.
func (w *tlsWire) uncork() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.flushLocked()
	w.corked = false
	if w.out != nil {
		*w.out = (*w.out)[:0]
		tlsWirePool.Put(w.out)
		w.out = nil
	}
	return err
}

// flushLocked writes the gathered records. mu must be held.
func (w *tlsWire) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if w.out == nil || len(*w.out) == 0 {
		return nil
	}
	_, w.err = w.Conn.Write(*w.out)
	*w.out = (*w.out)[:0]
	return w.err
}

const (
	// tlsReadChunk is four maximum-size TLS records.
	tlsReadChunk = 64 << 10
	// tlsWriteChunk: gathered records are written once they reach it
	// (four records, about one loopback TCP segment); small enough to
	// stay in the L2 cache between the TLS layer's copy and the
	// kernel's. The buffer has room for one more record, so it never
	// grows.
	tlsWriteChunk = 64 << 10
	// tlsMaxRecord bounds a TLS record on the wire (16 KiB of payload
	// plus header, content type, padding-free tag or TLS 1.2 explicit
	// nonce and MAC), for sizing only.
	tlsMaxRecord = 16<<10 + 256
)

// tlsWirePool holds the gathering buffers: a connection holds one only
// while it writes a response.
var tlsWirePool = sync.Pool{New: func() any {
	b := make([]byte, 0, tlsWriteChunk+tlsMaxRecord)
	return &b
}}

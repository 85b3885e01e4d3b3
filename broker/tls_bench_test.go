package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/weirhq/weir/internal/testcerts"
)

// BenchmarkFetchWriteCPU measures what the consume path costs the broker
// per GB, over PLAINTEXT and over TLS, in the same run: each round preads
// a 12-partition fetch response (1 MiB a partition) from a file in the
// page cache into buffers, as the log does, and writes it with the write
// loop's code (writeResponse) to a loopback TCP socket. The other end
// reads the raw bytes and drops them (no decryption; with
// WEIR_BENCH_DECRYPT set it decrypts them, as a client does, which slows
// the reader), and the figure is the writer's alone: the CPU time of its
// OS thread (RUSAGE_THREAD, user and system), which is what brokerbench's
// per-process figure holds for the consume phase minus request handling.
//
// The variants run interleaved, round by round, and report CPU-s/GB each
// and their ratio to plaintext:
//   - plain: writev of the spliced frame, no copy of the records;
//   - tls: the same frame through crypto/tls over the broker's tlsWire,
//     corked per response (records gathered into tlsWriteChunk writes);
//   - tls-uncorked: the same without corking (a write per 16 KiB record).
//
// Run: go test ./broker/ -run '^$' -bench BenchmarkFetchWriteCPU -benchtime 40x
func BenchmarkFetchWriteCPU(b *testing.B) {
	const parts, partBytes = 12, 1 << 20
	dir := b.TempDir()
	file := filepath.Join(dir, "segment")
	data := make([]byte, parts*partBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()

	ca := testcerts.NewCA(b, dir)
	srv := ca.Server("server")
	cert, err := tls.LoadX509KeyPair(srv.CertFile, srv.KeyFile)
	if err != nil {
		b.Fatal(err)
	}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, DynamicRecordSizingDisabled: true}

	type variant struct {
		name string
		c    *conn
		cpu  time.Duration
		sys  time.Duration
		done func()
	}
	decrypt := os.Getenv("WEIR_BENCH_DECRYPT") != ""
	dial := func(name string, useTLS, cork bool) *variant {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				accepted <- nil
				return
			}
			accepted <- nc
		}()
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		server := <-accepted
		if server == nil {
			b.Fatal("accept failed")
		}
		c := &conn{nc: server, logger: slog.New(slog.DiscardHandler)}
		var clientTLS *tls.Conn
		if useTLS {
			wire := newTLSWire(server)
			tc := tls.Server(wire, serverTLS)
			hs := make(chan error, 1)
			go func() { hs <- tc.Handshake() }()
			ccfg := ca.ClientTLS(nil)
			ccfg.ServerName = "localhost"
			cl := tls.Client(raw, ccfg)
			clientTLS = cl
			if err := cl.Handshake(); err != nil {
				b.Fatal(err)
			}
			if err := <-hs; err != nil {
				b.Fatal(err)
			}
			c.nc = tc
			if cork {
				c.wire = wire
			}
		}
		var rd io.Reader = raw
		if useTLS && decrypt {
			rd = clientTLS
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			_, _ = io.Copy(io.Discard, rd) // ciphertext or plaintext, dropped
		}()
		return &variant{name: name, c: c, done: func() {
			c.nc.Close()
			raw.Close()
			<-drained
		}}
	}
	vs := []*variant{dial("plain", false, false), dial("tls", true, true), dial("tls-uncorked", true, false)}
	defer func() {
		for _, v := range vs {
			v.done()
		}
	}()

	fetch := lookupAPI(int16(kmsg.Fetch))
	bufs := make([][]byte, parts)
	for i := range bufs {
		bufs[i] = make([]byte, partBytes)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var scratch []byte
	sw := newSpliceWriter()
	b.SetBytes(int64(len(vs) * parts * partBytes))
	for b.Loop() {
		for _, v := range vs {
			t0, s0 := threadCPUSys(b)
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = 12
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "bench"
			for p := range parts {
				if _, err := f.ReadAt(bufs[p], int64(p*partBytes)); err != nil {
					b.Fatal(err)
				}
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = int32(p)
				rp.RecordBatches = bufs[p]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
			s := &slot{api: fetch, corr: 1, resp: resp}
			var err error
			scratch, _, err = v.c.writeResponse(scratch, sw, s)
			if err != nil {
				b.Fatal(err)
			}
			t1, s1 := threadCPUSys(b)
			v.cpu += t1 - t0
			v.sys += s1 - s0
		}
	}
	gb := float64(b.N) * parts * partBytes / 1e9
	plain := vs[0].cpu.Seconds() / gb
	for _, v := range vs {
		perGB := v.cpu.Seconds() / gb
		b.ReportMetric(perGB, v.name+"-CPU-s/GB")
		b.ReportMetric(v.sys.Seconds()/gb, v.name+"-sys-s/GB")
		if v != vs[0] {
			b.ReportMetric(perGB/plain, v.name+"/plain")
		}
	}
}

// threadCPUSys is the user plus system CPU time of the calling OS thread
// and the system part of it.
func threadCPUSys(b *testing.B) (cpu, sys time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano())
}

// threadCPU is the user plus system CPU time of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGCMSealFloor is the cipher's floor for the TLS write path: the
// CPU time per GB of AES-128-GCM sealing 16 KiB records (the largest TLS
// record, what the TLS layer makes of a record set) with crypto/cipher,
// the implementation crypto/tls uses. Run it next to
// BenchmarkFetchWriteCPU: what the tls variant costs above plain plus this
// floor is copies, syscalls and framing, which the broker can change; the
// floor it cannot.
//
// Run: go test ./broker/ -run '^$' -bench BenchmarkGCMSealFloor -benchtime 2000x
func BenchmarkGCMSealFloor(b *testing.B) {
	key := make([]byte, 16)
	block, err := aes.NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	const record = 16 << 10
	src := make([]byte, record)
	dst := make([]byte, 0, record+aead.Overhead())
	nonce := make([]byte, aead.NonceSize())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(record)
	t0 := threadCPU(b)
	for b.Loop() {
		nonce[0]++
		dst = aead.Seal(dst[:0], nonce, src, nil)
	}
	cpu := threadCPU(b) - t0
	b.ReportMetric(cpu.Seconds()/(float64(b.N)*record/1e9), "CPU-s/GB")
}

package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/internal/testcerts"
)

// BenchmarkFetchWriteCPU measures what the consume path costs the broker
// per GB, over PLAINTEXT and over TLS, in the same run: each round reads
// a 12-partition fetch response (1 MiB a partition) from 12 logs whose
// files are in the page cache, as the fetch handler does, and writes it
// with the write loop's code (writeResponse) to a loopback TCP socket. The
// other end reads the raw bytes and drops them (no decryption; with
// WEIR_BENCH_DECRYPT set it decrypts them, as a client does, which slows
// the reader), and the figure is the writer's alone: the CPU time of its
// OS thread (RUSAGE_THREAD, user and system), which is what brokerbench's
// per-process figure holds for the consume phase minus request handling.
//
// The variants run interleaved, round by round, and report CPU-s/GB each
// and their ratio to plaintext:
//   - plain: Log.Read into pooled buffers, writev of the spliced frame, no
//     copy of the records;
//   - tls: the same frame through crypto/tls over the broker's tlsWire,
//     corked per response (records gathered into tlsWriteChunk writes),
//     the records read ahead by Log.Read (crypto/tls copies them from
//     memory);
//   - tls-spans: what the broker does over TLS: Log.ReadSpan, and the
//     write loop reads each spanPiece just before crypto/tls copies it
//     (fetchspan.go);
//   - tls-uncorked: tls without corking (a write per 16 KiB record).
//
// Run: go test ./broker/ -run '^$' -bench BenchmarkFetchWriteCPU -benchtime 40x
func BenchmarkFetchWriteCPU(b *testing.B) {
	const parts, partBytes = 12, 1 << 20
	dir := b.TempDir()
	logs := make([]*wlog.Log, parts)
	value := strings.Repeat("v", 4000)
	for p := range logs {
		l, err := wlog.Open(wlog.Options{Dir: filepath.Join(dir, fmt.Sprint("bench-", p))})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		vals := make([]string, 16) // 64 KiB batches
		for i := range vals {
			vals[i] = value
		}
		for l.HighWatermark() < 16*20 {
			if _, err := l.Append(makeBatch(0, vals...), true); err != nil {
				b.Fatal(err)
			}
		}
		logs[p] = l
	}
	ca := testcerts.NewCA(b, dir)
	srv := ca.Server("server")
	cert, err := tls.LoadX509KeyPair(srv.CertFile, srv.KeyFile)
	if err != nil {
		b.Fatal(err)
	}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, DynamicRecordSizingDisabled: true}

	type variant struct {
		name  string
		c     *conn
		spans bool
		cpu   time.Duration
		sys   time.Duration
		done  func()
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
	spans := dial("tls-spans", true, true)
	spans.spans = true
	vs := []*variant{dial("plain", false, false), dial("tls", true, true), spans, dial("tls-uncorked", true, false)}
	defer func() {
		for _, v := range vs {
			v.done()
		}
	}()

	fetch := lookupAPI(int16(kmsg.Fetch))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var scratch []byte
	sw := newSpliceWriter()
	var written int64
	for b.Loop() {
		for _, v := range vs {
			t0, s0 := threadCPUSys(b)
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = 12
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "bench"
			s := &slot{api: fetch, corr: 1, resp: resp}
			for p, l := range logs {
				rd, err := readPart(l, 0, partBytes, l.HighWatermark(), v.spans)
				if err != nil {
					b.Fatal(err)
				}
				s.onWritten(rd.release)
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = int32(p)
				rp.RecordBatches = rd.data
				if rd.span != nil {
					rp.RecordBatches = []byte{}
					s.addSpan(spanKey{rt.Topic, rt.TopicID, rp.Partition}, rd.span)
				}
				rt.Partitions = append(rt.Partitions, rp)
				written += rd.size
			}
			resp.Topics = append(resp.Topics, rt)
			var err error
			scratch, _, err = v.c.writeResponse(scratch, sw, s)
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range s.release {
				f()
			}
			t1, s1 := threadCPUSys(b)
			v.cpu += t1 - t0
			v.sys += s1 - s0
		}
	}
	b.SetBytes(written / int64(b.N))
	gb := float64(written) / float64(len(vs)) / 1e9
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

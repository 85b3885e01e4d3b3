package broker

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// memConn is a net.Conn reading a fixed input and recording the output.
type memConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (m *memConn) Read(p []byte) (int, error)         { return m.in.Read(p) }
func (m *memConn) Write(p []byte) (int, error)        { return m.out.Write(p) }
func (m *memConn) Close() error                       { return nil }
func (m *memConn) LocalAddr() net.Addr                { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092} }
func (m *memConn) RemoteAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (m *memConn) SetDeadline(t time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(t time.Time) error { return nil }

// serveBytes runs one connection over input and returns what it wrote.
func serveBytes(b *Broker, input []byte) []byte {
	mc := &memConn{in: bytes.NewReader(input)}
	c := newConn(b, mc)
	c.serve()
	return mc.out.Bytes()
}

// FuzzConnection feeds arbitrary bytes to a connection: the broker must
// never panic, and what it writes must be well-formed response frames with
// correlation IDs in request order.
func FuzzConnection(f *testing.F) {
	seeds := []kmsg.Request{
		kmsg.NewPtrApiVersionsRequest(),
		kmsg.NewPtrMetadataRequest(),
		produceReq(9, -1, "fz", 0, makeBatch(1, "a", "b")),
		produceReq(3, 1, "fz", 0, makeBatch(1, "a")),
		produceReq(13, 0, "", 0, makeBatch(1, "a")),
		fetchReq(4, "fz", [16]byte{}, 0, 0, 0),
		fetchReq(12, "fz", [16]byte{}, 0, 0, 10),
		fetchReq(13, "", [16]byte{1}, 0, 0, 0),
		kmsg.NewPtrListOffsetsRequest(),
		kmsg.NewPtrCreateTopicsRequest(),
		kmsg.NewPtrDeleteTopicsRequest(),
		kmsg.NewPtrDescribeConfigsRequest(),
		kmsg.NewPtrIncrementalAlterConfigsRequest(),
		kmsg.NewPtrDescribeClusterRequest(),
		kmsg.NewPtrDescribeLogDirsRequest(),
		kmsg.NewPtrInitProducerIDRequest(),
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "fz", NumPartitions: 1, ReplicationFactor: 1}}
	seeds = append(seeds, ct)
	for i, r := range seeds {
		for _, v := range []int16{0, 3, r.MaxVersion()} {
			if v > r.MaxVersion() {
				continue
			}
			r.SetVersion(v)
			f.Add(frame(r, int32(i)))
		}
	}
	// Pipelined Produce requests large enough for pooled frames (more
	// than a connection's frame slots), after the topic's creation.
	big := frame(ct, 90)
	for i := range maxPooledFramesPerConn + 2 {
		val := string(bytes.Repeat([]byte{'v'}, pooledFrameMin))
		big = append(big, frame(produceReq(9, []int16{-1, 1, 0}[i%3], "fz", 0, makeBatch(1, val)), int32(91+i))...)
	}
	f.Add(big)
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0})

	b, _ := testBroker(f)
	// Every partition is a directory with open files: keep inputs that
	// create topics cheap.
	b.topics.maxPartitions = 8
	f.Fuzz(func(t *testing.T, input []byte) {
		out := serveBytes(b, input)
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("%d panics", n)
		}
		// Responses: well framed, correlation IDs in the order the
		// requests were framed in the input.
		var corrs []int32
		for in := input; len(in) >= 4; {
			size := int(int32(binary.BigEndian.Uint32(in)))
			if size < 8 || size > len(in)-4 {
				break
			}
			corrs = append(corrs, int32(binary.BigEndian.Uint32(in[8:])))
			in = in[4+size:]
		}
		r := bytes.NewReader(out)
		for i := 0; ; i++ {
			var hdr [8]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				if r.Len() != 0 {
					t.Fatalf("trailing %d bytes", r.Len())
				}
				break
			}
			size := binary.BigEndian.Uint32(hdr[:])
			if int(size)-4 > r.Len() || size < 4 {
				t.Fatalf("bad response size %d with %d left", size, r.Len())
			}
			r.Seek(int64(size)-4, io.SeekCurrent)
			corr := int32(binary.BigEndian.Uint32(hdr[4:]))
			// acks=0 produce requests have no response: skip them.
			for i < len(corrs) && corrs[i] != corr {
				i++
			}
			if i == len(corrs) {
				t.Fatalf("response with correlation %d out of order (requests %v)", corr, corrs)
			}
		}
	})
}

// The seeds above also run as a normal test; this checks the empty-input
// and the many-requests paths deterministically.
func TestServeBytesManyRequests(t *testing.T) {
	b, _ := testBroker(t)
	var in []byte
	for i := range 300 {
		in = append(in, frame(kmsg.NewPtrApiVersionsRequest(), int32(i))...)
	}
	out := serveBytes(b, in)
	for i := range 300 {
		size := binary.BigEndian.Uint32(out)
		if corr := int32(binary.BigEndian.Uint32(out[4:])); corr != int32(i) {
			t.Fatalf("response %d has correlation %d", i, corr)
		}
		out = out[4+size:]
	}
	if len(out) != 0 || len(serveBytes(b, nil)) != 0 {
		t.Fatal("extra output")
	}
}

// FuzzRegistryLoad feeds arbitrary meta.json contents to the registry:
// it must load or fail with an error, never panic, and what it loads must
// be valid topics.
func FuzzRegistryLoad(f *testing.F) {
	f.Add([]byte(`{"magic":"weir-meta","version":1,"cluster_id":"c","topics":[{"name":"t","id":"000102030405060708090a0b0c0d0e0f","partitions":2,"configs":{"retention.ms":"5"}}]}`))
	f.Add([]byte(`{"magic":"weir-meta","version":1,"topics":[{"name":"../x","id":"00","partitions":-1}]}`))
	f.Add([]byte(`{"magic":"other","version":9}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewCrashableMem()
		if err := mem.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "/d/"+metaFile, data); err != nil {
			t.Fatal(err)
		}
		logs, err := wlog.OpenManager(wlog.ManagerOptions{FS: mem, Dir: logsDir("/d")})
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		r, err := openRegistryLimited(mem, "/d", logs, slog.New(slog.DiscardHandler), 4)
		if err != nil {
			return
		}
		for _, tp := range r.all() {
			if validateTopicName(tp.name) != nil || len(tp.parts) < 1 || len(tp.parts) > 4 {
				t.Fatalf("loaded invalid topic %q with %d partitions", tp.name, len(tp.parts))
			}
		}
	})
}

// FuzzRecordTimestamp: the batch walker used for lag-in-time never panics.
func FuzzRecordTimestamp(f *testing.F) {
	f.Add(makeBatch(1000, "a", "b"), int64(1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 200}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, off int64) {
		recordTimestamp(data, off)
	})
}

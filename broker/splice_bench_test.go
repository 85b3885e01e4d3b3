package broker

import (
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// discardConn counts bytes; writev through net.Buffers falls back to one
// Write per buffer, which is what a socket costs minus the syscall.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

func benchFetchResponse() *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "bench"
	for p := range 12 {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(p)
		rp.RecordBatches = make([]byte, 1<<20)
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// BenchmarkFetchWrite compares writing a 12 MiB fetch response by plain
// encoding (one copy of the records) with the splice path (no copy).
func BenchmarkFetchWrite(b *testing.B) {
	resp := benchFetchResponse()
	b.Run("encode-copy", func(b *testing.B) {
		b.SetBytes(12 << 20)
		var buf []byte
		for b.Loop() {
			buf = appendResponse(buf[:0], 1, resp)
			_, _ = io.Discard.Write(buf)
		}
	})
	b.Run("splice", func(b *testing.B) {
		b.SetBytes(12 << 20)
		sw := newSpliceWriter()
		var buf []byte
		for b.Loop() {
			bufs, nb, ok := sw.frame(buf, 1, resp)
			buf = nb
			if !ok {
				b.Fatal("not spliced")
			}
			_, _ = bufs.WriteTo(discardConn{})
		}
	})
}

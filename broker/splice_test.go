package broker

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The spliced frame is byte-for-byte the plain kmsg encoding, for every
// fetch version and a mix of small, large, empty and error partitions.
func TestSpliceMatchesEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sw := newSpliceWriter()
	var buf []byte
	for v := int16(4); v <= 18; v++ {
		for trial := range 6 {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			resp.SessionID = int32(trial)
			for ti := range 1 + rng.IntN(3) {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = string(rune('a' + ti))
				rt.TopicID = [16]byte{byte(ti + 1)}
				for pi := range 1 + rng.IntN(4) {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition = int32(pi)
					rp.HighWatermark = rng.Int64N(1 << 40)
					var n int
					switch rng.IntN(4) {
					case 0:
					case 1:
						n = rng.IntN(spliceMin)
					default:
						n = spliceMin + rng.IntN(1<<17) // crosses uvarint sizes
					}
					if n > 0 {
						rp.RecordBatches = make([]byte, n)
						for i := range rp.RecordBatches {
							rp.RecordBatches[i] = byte(rng.IntN(256))
						}
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			want := appendResponse(nil, 77, resp)
			bufs, b, ok := sw.frame(buf, 77, resp)
			buf = b
			var got []byte
			if ok {
				for _, p := range bufs {
					got = append(got, p...)
				}
			} else {
				got = appendResponse(nil, 77, resp)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d trial %d: spliced frame differs (len %d vs %d)", v, trial, len(got), len(want))
			}
			// The response is left intact.
			if again := appendResponse(nil, 77, resp); !bytes.Equal(again, want) {
				t.Fatalf("v%d: frame() modified the response", v)
			}
		}
	}
}

// A marker collision (records containing the marker bytes before the
// spliced field) falls back instead of corrupting the frame.
func TestSpliceMarkerInData(t *testing.T) {
	sw := newSpliceWriter()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = string(sw.marker[:]) // the topic name contains the marker prefix
	for i := range 2 {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(i)
		rp.RecordBatches = bytes.Repeat([]byte{byte(i)}, spliceMin)
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	want := appendResponse(nil, 1, resp)
	bufs, _, ok := sw.frame(nil, 1, resp)
	if ok {
		var got []byte
		for _, p := range bufs {
			got = append(got, p...)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("spliced frame differs")
		}
	}
}

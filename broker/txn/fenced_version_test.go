package txn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Clients of versions before KIP-588 get INVALID_PRODUCER_EPOCH instead of
// PRODUCER_FENCED, exactly below Kafka's version cut-offs.
func TestDowngradeFencedByVersion(t *testing.T) {
	fenced, old := kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code
	for _, tc := range []struct {
		name   string
		cutoff int16 // first version that understands PRODUCER_FENCED
		req    func(v int16) kmsg.Request
		resp   func() (kmsg.Response, *int16)
	}{
		{"InitProducerId", 4,
			func(v int16) kmsg.Request { r := kmsg.NewPtrInitProducerIDRequest(); r.Version = v; return r },
			func() (kmsg.Response, *int16) {
				r := kmsg.NewPtrInitProducerIDResponse()
				r.ErrorCode = fenced
				return r, &r.ErrorCode
			}},
		{"AddPartitionsToTxn", 2,
			func(v int16) kmsg.Request { r := kmsg.NewPtrAddPartitionsToTxnRequest(); r.Version = v; return r },
			func() (kmsg.Response, *int16) {
				r := kmsg.NewPtrAddPartitionsToTxnResponse()
				r.Topics = []kmsg.AddPartitionsToTxnResponseTopic{{Topic: "t",
					Partitions: []kmsg.AddPartitionsToTxnResponseTopicPartition{{Partition: 0, ErrorCode: fenced}}}}
				return r, &r.Topics[0].Partitions[0].ErrorCode
			}},
		{"AddOffsetsToTxn", 2,
			func(v int16) kmsg.Request { r := kmsg.NewPtrAddOffsetsToTxnRequest(); r.Version = v; return r },
			func() (kmsg.Response, *int16) {
				r := kmsg.NewPtrAddOffsetsToTxnResponse()
				r.ErrorCode = fenced
				return r, &r.ErrorCode
			}},
		{"EndTxn", 2,
			func(v int16) kmsg.Request { r := kmsg.NewPtrEndTxnRequest(); r.Version = v; return r },
			func() (kmsg.Response, *int16) {
				r := kmsg.NewPtrEndTxnResponse()
				r.ErrorCode = fenced
				return r, &r.ErrorCode
			}},
	} {
		for v := int16(0); v <= tc.cutoff; v++ {
			resp, code := tc.resp()
			downgradeFenced(tc.req(v), resp)
			want := fenced
			if v < tc.cutoff {
				want = old
			}
			if *code != want {
				t.Errorf("%s v%d: code %d, want %d", tc.name, v, *code, want)
			}
		}
	}
}

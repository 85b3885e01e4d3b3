package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/txn"
)

// fakeVerifier answers Verify with the codes in answers, in turn.
type fakeVerifier struct {
	answers  [][]int16
	calls    int
	released int
}

func (f *fakeVerifier) Handle(context.Context, kmsg.Request) (kmsg.Response, error) { return nil, nil }
func (f *fakeVerifier) APIVersions() []kmsg.ApiVersionsResponseApiKey               { return nil }
func (f *fakeVerifier) Close() error                                                { return nil }
func (f *fakeVerifier) Verify(_ context.Context, _ string, _ int64, _ int16, parts []txn.TopicPartition, _ bool) ([]int16, func(), error) {
	a := f.answers[min(f.calls, len(f.answers)-1)]
	f.calls++
	return a, func() { f.released++ }, nil
}

// TestVerifyRetrying: NOT_ENOUGH_REPLICAS (previous transaction completing)
// is retried by the broker, releasing each refused verification; other
// codes are answered at once.
func TestVerifyRetrying(t *testing.T) {
	nes := kerr.NotEnoughReplicas.Code
	f := &fakeVerifier{answers: [][]int16{{0, nes}, {nes, 0}, {0, 0}}}
	b := &Broker{txns: f}
	parts := []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}
	codes, rel, err := b.verifyRetrying(context.Background(), "id", 1, 0, parts, true)
	if err != nil || codes[0] != 0 || codes[1] != 0 || f.calls != 3 || f.released != 2 {
		t.Fatalf("codes %v err %v calls %d released %d", codes, err, f.calls, f.released)
	}
	rel()
	f = &fakeVerifier{answers: [][]int16{{kerr.InvalidTxnState.Code, nes}}}
	b.txns = f
	if codes, _, _ := b.verifyRetrying(context.Background(), "id", 1, 0, parts, true); f.calls < 2 || codes[1] != nes {
		t.Fatalf("persistent NOT_ENOUGH_REPLICAS: codes %v after %d calls", codes, f.calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &fakeVerifier{answers: [][]int16{{nes}}}
	b.txns = f
	if _, _, err := b.verifyRetrying(ctx, "id", 1, 0, parts[:1], true); err == nil {
		t.Fatal("canceled context: no error")
	}
}

package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRealClockTimers: with the real clock, deadlines fire on their own
// (the loop arms a timer for the earliest one); no tick is needed.
func TestRealClockTimers(t *testing.T) {
	st := &memStore{}
	topics := newFakeTopics(map[string]int32{"t": 1})
	c, err := NewCoordinator(Options{
		Offsets: st, Topics: topics,
		InitialRebalanceDelay: 20 * time.Millisecond,
		MinSessionTimeout:     10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &harness{t: t, c: c}
	req := joinReq(3, "g", "", "")
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 100, 100
	resp := h.handle(req).(*kmsg.JoinGroupResponse) // blocks until the initial delay passes
	if resp.ErrorCode != 0 || resp.Generation != 1 {
		t.Fatalf("join: %+v", resp)
	}
	// Nobody syncs or heartbeats: the member is removed (sync timeout,
	// then the group is Empty).
	deadline := time.Now().Add(10 * time.Second)
	for h.groupState("g") != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("member never expired; state %s", h.groupState("g"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

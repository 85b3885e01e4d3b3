package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHeartbeat measures one classic Heartbeat round trip through the
// coordinator's loop with 1 group and with 1000 Stable groups of 5 members
// (every request checks the groups' deadlines, so this is the cost that
// grows with the number of members).
//
//	go test -run XXX -bench Heartbeat ./broker/group
func BenchmarkHeartbeat(b *testing.B) {
	for _, groups := range []int{1, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			c, err := NewCoordinator(Options{Offsets: &memStore{}, Topics: newFakeTopics(map[string]int32{"t": 1}), Now: clk.Now, InitialRebalanceDelay: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			type mem struct {
				group, id string
				gen       int32
			}
			var ms []mem
			// Build the groups directly in the loop: one member each joins
			// and syncs, then four more are added to the Stable generation.
			_ = c.do(ctx, func() {
				now := clk.Now()
				for gi := range groups {
					g := c.newGroup(fmt.Sprintf("g%d", gi), kindClassic)
					g.protocolType, g.protocol, g.generation, g.state = "consumer", "range", 1, stateStable
					for mi := range 5 {
						m := &member{id: fmt.Sprintf("m%d", mi), protocolType: "consumer", sessionTimeout: 10 * time.Second,
							rebalanceTimeout: 10 * time.Second, deadline: now.Add(10 * time.Second), synced: true,
							protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range"}}}
						g.members[m.id] = m
						ms = append(ms, mem{g.id, m.id, 1})
					}
					g.leader = "m0"
				}
			})
			b.ResetTimer()
			for i := range b.N {
				m := ms[i%len(ms)]
				resp, err := c.Handle(ctx, hbReq(m.group, m.id, m.gen))
				if err != nil || resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
					b.Fatalf("heartbeat: %v %+v", err, resp)
				}
			}
		})
	}
}

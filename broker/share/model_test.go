package share

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRandomizedAgainstModel drives the coordinator with random
// produces, fetches, acknowledgements, lock expiries, session closes and
// restarts of three members over two partitions, and checks every answer
// against a simple model: a record is held by at most one member at a
// time, is delivered with a count one above its previous deliveries and
// never beyond the limit, is never delivered again once accepted or
// rejected, and in the end every record is settled.
func TestRandomizedAgainstModel(t *testing.T) {
	var total modelStats
	for seed := int64(1); seed <= 8; seed++ {
		t.Run("", func(t *testing.T) {
			st := runModel(t, seed)
			total.deliveries += st.deliveries
			total.redeliveries += st.redeliveries
			total.atLimit += st.atLimit
		})
	}
	// The runs reached what they are meant to check.
	if total.redeliveries == 0 || total.atLimit == 0 || total.deliveries < 500 {
		t.Fatalf("the random runs exercised too little: %+v", total)
	}
}

type modelStats struct{ deliveries, redeliveries, atLimit int }

type modelRec struct {
	deliveries int16
	holder     string
	deadline   time.Time
	settled    bool
}

func runModel(t *testing.T, seed int64) (st modelStats) {
	rng := rand.New(rand.NewSource(seed))
	s := newScript(t)
	defer func() { s.c.Close() }()
	const limit = 3
	s.run(t, []string{"config", "share.auto.offset.reset=earliest", "share.delivery.count.limit=3"})
	members := []string{"A", "B", "C"}
	for _, m := range members {
		s.run(t, []string{"join", m, "topics=t"})
	}
	model := map[[2]int64]*modelRec{} // (partition, offset)
	hw := [2]int64{}
	lock := 30 * time.Second
	ctx := context.Background()

	fetch := func(m string) {
		sm := s.member(m)
		req := kmsg.NewPtrShareFetchRequest()
		req.Version = 2
		g, id := "g", m
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &id, sm.session
		req.MaxBytes, req.MaxRecords = 1<<20, int32(1+rng.Intn(8))
		if rng.Intn(2) == 0 {
			req.ShareAcquireMode = 1
		}
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: s.topics["t"].id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
		resp, err := s.c.Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		fr := resp.(*kmsg.ShareFetchResponse)
		if fr.ErrorCode != 0 {
			t.Fatalf("seed %d: fetch %s: error %d", seed, m, fr.ErrorCode)
		}
		sm.session = req.ShareSessionEpoch + 1
		for _, rt := range fr.Topics {
			for _, rp := range rt.Partitions {
				for _, a := range rp.AcquiredRecords {
					for o := a.FirstOffset; o <= a.LastOffset; o++ {
						r := model[[2]int64{int64(rp.Partition), o}]
						switch {
						case r == nil:
							t.Fatalf("seed %d: %s acquired %d/%d, never produced", seed, m, rp.Partition, o)
						case r.settled:
							t.Fatalf("seed %d: %s acquired settled record %d/%d", seed, m, rp.Partition, o)
						case r.holder != "":
							t.Fatalf("seed %d: %s acquired %d/%d held by %s", seed, m, rp.Partition, o, r.holder)
						case a.DeliveryCount != r.deliveries+1 || a.DeliveryCount > limit:
							t.Fatalf("seed %d: %d/%d delivered with count %d after %d deliveries", seed, rp.Partition, o, a.DeliveryCount, r.deliveries)
						}
						r.deliveries, r.holder, r.deadline = a.DeliveryCount, m, s.now.Add(lock)
						st.deliveries++
						if r.deliveries > 1 {
							st.redeliveries++
						}
					}
				}
			}
		}
	}
	release := func(r *modelRec) {
		r.holder = ""
		if r.deliveries >= limit {
			r.settled = true
			st.atLimit++
		}
	}
	ack := func(m string, all bool) {
		sm := s.member(m)
		if sm.session == 0 {
			return
		}
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = 2
		g, id := "g", m
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &id, sm.session
		type change struct {
			r   *modelRec
			typ int8
		}
		var changes []change
		for p := int64(0); p < 2; p++ {
			part := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: int32(p)}
			for o := int64(0); o < hw[p]; o++ {
				r := model[[2]int64{p, o}]
				if r.holder != m || (!all && rng.Intn(2) == 0) {
					continue
				}
				typ := []int8{AckAccept, AckAccept, AckRelease, AckReject}[rng.Intn(4)]
				if all {
					typ = AckAccept
				}
				part.AcknowledgementBatches = append(part.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: o, LastOffset: o, AcknowledgeTypes: []int8{typ}})
				changes = append(changes, change{r, typ})
			}
			if len(part.AcknowledgementBatches) > 0 {
				if len(req.Topics) == 0 {
					req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: s.topics["t"].id}}
				}
				req.Topics[0].Partitions = append(req.Topics[0].Partitions, part)
			}
		}
		resp, err := s.c.Handle(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ar := resp.(*kmsg.ShareAcknowledgeResponse)
		if ar.ErrorCode != 0 {
			t.Fatalf("seed %d: ack %s: error %d", seed, m, ar.ErrorCode)
		}
		sm.session = req.ShareSessionEpoch + 1
		for _, rt := range ar.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("seed %d: ack %s partition %d: error %d", seed, m, rp.Partition, rp.ErrorCode)
				}
			}
		}
		for _, c := range changes {
			switch c.typ {
			case AckAccept, AckReject:
				c.r.holder, c.r.settled = "", true
			case AckRelease:
				release(c.r)
			}
		}
	}
	for step := 0; step < 600; step++ {
		m := members[rng.Intn(len(members))]
		switch op := rng.Intn(20); {
		case op < 4:
			p := rng.Int63n(2)
			n := 1 + rng.Intn(4)
			s.run(t, []string{"produce", "t/" + string(rune('0'+p)), "n=" + string(rune('0'+n))})
			for i := 0; i < n; i++ {
				model[[2]int64{p, hw[p]}] = &modelRec{}
				hw[p]++
			}
		case op < 11:
			fetch(m)
		case op < 16:
			ack(m, false)
		case op < 18:
			for _, mm := range members { // members stay: the session timeout (45s) is longer than a step
				s.run(t, []string{"heartbeat", mm})
			}
			s.now = s.now.Add(time.Duration(rng.Intn(40)) * time.Second)
			s.c.Tick()
			for _, r := range model {
				if r.holder != "" && !s.now.Before(r.deadline) {
					release(r)
				}
			}
		case op < 19:
			s.run(t, []string{"close", m})
			for _, r := range model {
				if r.holder == m {
					release(r)
				}
			}
		default:
			if rng.Intn(4) == 0 {
				s.run(t, []string{"restart"})
				for _, r := range model {
					if r.holder != "" {
						release(r) // locks do not survive; counts do
					}
				}
				for _, mm := range members {
					s.run(t, []string{"join", mm, "topics=t"})
				}
			}
		}
		s.checkInvariants(t)
	}
	// Drain: accept everything until nothing is left.
	for round := 0; round < 200; round++ {
		for _, m := range members {
			fetch(m)
			ack(m, true)
		}
		left := 0
		for _, r := range model {
			if !r.settled {
				left++
			}
		}
		if left == 0 {
			s.c.mu.Lock()
			defer s.c.mu.Unlock()
			for p := int32(0); p < 2; p++ {
				sp := s.c.parts[partKey{"g", s.topics["t"].id, p}]
				if sp == nil || sp.start != hw[p] || len(sp.recs) != 0 {
					t.Fatalf("seed %d: partition %d settled in the model but the share-partition is %+v (hw %d)", seed, p, sp, hw[p])
				}
			}
			return st
		}
	}
	t.Fatalf("seed %d: records never settled", seed)
	return st
}

package nexmark

import (
	"reflect"
	"testing"
	"time"
)

func generate(t *testing.T, cfg GeneratorConfig, n int) []Event {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Event, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

func TestGeneratorProportionsAndIDs(t *testing.T) {
	const n = 50 * 200
	events := generate(t, GeneratorConfig{Seed: 3, BaseTime: 1000, EventsPerSecond: 1000}, n)
	var counts [3]int
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	bidsOnHot, bidsByHot := 0, 0
	for i, e := range events {
		if err := e.Validate(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		counts[e.Type]++
		if want := int64(1000 + i); e.DateTime() != want {
			t.Fatalf("event %d dateTime %d, want %d (1000 events per second)", i, e.DateTime(), want)
		}
		switch e.Type {
		case PersonEvent:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person id %d, want %d", i, e.Person.ID, nextPerson)
			}
			nextPerson++
		case AuctionEvent:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction id %d, want %d", i, a.ID, nextAuction)
			}
			nextAuction++
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories || a.Expires <= a.DateTime || a.Reserve <= a.InitialBid {
				t.Fatalf("event %d: bad auction %+v", i, a)
			}
		case BidEvent:
			b := e.Bid
			hotAuction := (nextAuction-1-FirstAuctionID)/hotIDModulus*hotIDModulus + FirstAuctionID
			if b.Auction == hotAuction {
				bidsOnHot++
			}
			if b.Bidder == (nextPerson-1-FirstPersonID)/hotIDModulus*hotIDModulus+FirstPersonID+1 {
				bidsByHot++
			}
			if b.Price < 100 || b.Auction < FirstAuctionID || b.Bidder < FirstPersonID {
				t.Fatalf("event %d: bad bid %+v", i, b)
			}
		}
	}
	if counts != [3]int{n / 50, n / 50 * 3, n / 50 * 46} {
		t.Fatalf("person/auction/bid counts %v, want 1:3:46 of %d", counts, n)
	}
	// Half the bids go to the hot auction, three quarters come from the hot
	// bidder (plus the few random picks that land on the same ID).
	if f := float64(bidsOnHot) / float64(counts[2]); f < 0.45 || f > 0.6 {
		t.Errorf("fraction of bids on the hot auction %.3f, want about 0.5", f)
	}
	if f := float64(bidsByHot) / float64(counts[2]); f < 0.7 || f > 0.8 {
		t.Errorf("fraction of bids by the hot bidder %.3f, want about 0.75", f)
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	cfg := GeneratorConfig{Seed: 11, BaseTime: 5, EventsPerSecond: 300, Disorder: 2 * time.Second}
	a, b := generate(t, cfg, 3000), generate(t, cfg, 3000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same config, different events")
	}
	cfg.Seed = 12
	c := generate(t, cfg, 3000)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same events")
	}
}

func TestGeneratorDisorder(t *testing.T) {
	const n = 20000
	ordered := generate(t, GeneratorConfig{Seed: 5, EventsPerSecond: 1000}, n)
	for _, d := range []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 3 * time.Second} {
		events := generate(t, GeneratorConfig{Seed: 5, EventsPerSecond: 1000, Disorder: d}, n)
		maxSeen, late, maxBehind := int64(-1), 0, int64(0)
		for _, e := range events {
			ts := e.DateTime()
			if ts < maxSeen {
				late++
				maxBehind = max(maxBehind, maxSeen-ts)
			}
			maxSeen = max(maxSeen, ts)
		}
		if maxBehind > d.Milliseconds() {
			t.Errorf("disorder %v: an event is %d ms behind the max seen before it", d, maxBehind)
		}
		if late == 0 || maxBehind < d.Milliseconds()/2 {
			t.Errorf("disorder %v: %d late events, max %d ms behind: not shuffled", d, late, maxBehind)
		}
		// The same events as without disorder (a prefix may differ only by
		// events still held back).
		seen := map[int64]int{}
		for _, e := range events {
			seen[e.DateTime()]++
		}
		for _, e := range ordered[:n-int(d.Milliseconds())-1] {
			if seen[e.DateTime()] == 0 {
				t.Fatalf("disorder %v: event at %d missing", d, e.DateTime())
			}
		}
	}
}

// BenchmarkGenerateEncode measures generating and encoding one event
// (what weir bench nexmark generate does per record), reported beside
// encoding alone of pre-generated events as the same-run baseline, so the
// ratio shows the generator's own share.
func BenchmarkGenerateEncode(b *testing.B) {
	g, err := NewGenerator(GeneratorConfig{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	pre := make([]Event, 1000)
	for i := range pre {
		pre[i] = g.Next()
	}
	var buf []byte
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		buf, _ = Encode(buf[:0], pre[i%len(pre)])
	}
	encodeOnly := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	start = time.Now()
	for range b.N {
		buf, _ = Encode(buf[:0], g.Next())
	}
	both := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(encodeOnly, "encode-only-ns/event")
	b.ReportMetric(both, "generate+encode-ns/event")
	b.ReportMetric(both/encodeOnly, "x-encode-only")
	b.ReportMetric(1e9/both, "events/s")
}

package nexmark

import (
	"encoding/json"
	"reflect"
	"testing"
)

func person(id, t int64, name, state string) Event {
	return Event{Type: PersonEvent, Person: &Person{ID: id, Name: name, City: "c-" + state, State: state, DateTime: t}}
}

func auction(id, seller, category, t, expires, reserve int64) Event {
	return Event{Type: AuctionEvent, Auction: &Auction{ID: id, Seller: seller, Category: category, DateTime: t, Expires: expires, Reserve: reserve}}
}

func bid(auction, bidder, price, t int64) Event {
	return Event{Type: BidEvent, Bid: &Bid{Auction: auction, Bidder: bidder, Price: price, DateTime: t}}
}

func check[T any](t *testing.T, name string, got, want []T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
	}
}

func TestQ0Q1Q2(t *testing.T) {
	events := []Event{person(1, 0, "a", "OR"), bid(246, 1, 1000, 5), auction(2, 1, 10, 6, 9, 0), bid(7, 2, 500, 3), bid(0, 3, 1, 9)}
	check(t, "q0", Q0(events), events)
	check(t, "q1", Q1(events), []Q1Result{
		{Auction: 246, Bidder: 1, Price: 908, DateTime: 5},
		{Auction: 7, Bidder: 2, Price: 454, DateTime: 3},
		{Auction: 0, Bidder: 3, Price: 0.908, DateTime: 9},
	})
	check(t, "q2", Q2(events), []Q2Result{{Auction: 246, Price: 1000}, {Auction: 0, Price: 1}})
}

func TestQ3(t *testing.T) {
	events := []Event{
		auction(20, 1, 10, 0, 1, 0), // seller joins later: still joined
		person(1, 5, "p1", "OR"),
		person(2, 5, "p2", "WA"), // wrong state
		person(3, 5, "p3", "CA"),
		person(4, 5, "p4", "ID"),
		auction(11, 2, 10, 6, 7, 0),
		auction(12, 3, 11, 6, 7, 0), // wrong category
		auction(13, 3, 10, 6, 7, 0),
		auction(14, 4, 10, 6, 7, 0),
		auction(15, 9, 10, 6, 7, 0), // unknown seller
	}
	check(t, "q3", Q3(events), []Q3Result{
		{Name: "p3", City: "c-CA", State: "CA", ID: 13},
		{Name: "p4", City: "c-ID", State: "ID", ID: 14},
		{Name: "p1", City: "c-OR", State: "OR", ID: 20},
	})
}

func TestQ4Q6WinningBids(t *testing.T) {
	events := []Event{
		auction(1, 100, 10, 1000, 2000, 50),
		bid(1, 7, 40, 1100), // below reserve
		bid(1, 7, 60, 1200), // valid
		bid(1, 8, 90, 2000), // at expires: too late
		bid(1, 8, 95, 999),  // before the auction opened
		bid(1, 9, 60, 1150), // same price, earlier: wins the tie
		auction(2, 100, 10, 0, 5000, 0),
		bid(2, 7, 10, 0), // at the auction's dateTime: valid
		auction(3, 200, 11, 0, 100, 0),
		bid(3, 7, 33, 50),
		auction(4, 200, 11, 0, 100, 1000), // no valid bid: no winner
		bid(4, 7, 33, 50),
		bid(99, 7, 1, 50), // unknown auction
	}
	w := winningBids(events)
	if len(w) != 3 || w[0].bid.Bidder != 9 || w[0].bid.Price != 60 || w[1].bid.Price != 10 || w[2].bid.Price != 33 {
		t.Fatalf("winning bids %+v", w)
	}
	check(t, "q4", Q4(events), []Q4Result{{Category: 10, Avg: 35}, {Category: 11, Avg: 33}})
	check(t, "q6", Q6(events), []Q6Result{{Seller: 100, Avg: 35}, {Seller: 200, Avg: 33}})

	// q6 averages the last 10 auctions by close time.
	var many []Event
	for i := int64(0); i < 12; i++ {
		// Auction i closes at 1000-i: auctions 11, 10, ..., 0 in close
		// order, so the last ten are 9..0 with prices 9..0 (+1).
		many = append(many, auction(i, 5, 10, 0, 1000-i, 0), bid(i, 1, i+1, 1))
	}
	check(t, "q6 last 10", Q6(many), []Q6Result{{Seller: 5, Avg: 5.5}})
}

func TestQ5HopWindows(t *testing.T) {
	events := []Event{
		bid(1, 1, 1, 0),
		bid(1, 1, 1, 1999),
		bid(2, 1, 1, 2000), // first instant of window [2000, 12000)
		bid(2, 1, 1, 2001),
		bid(3, 1, 1, 10000), // exactly at the end of [0, 10000): not in it
	}
	got := Q5(events)
	want := []Q5Result{
		{-8000, 2000, 1, 2},
		{-6000, 4000, 1, 2}, {-6000, 4000, 2, 2},
		{-4000, 6000, 1, 2}, {-4000, 6000, 2, 2},
		{-2000, 8000, 1, 2}, {-2000, 8000, 2, 2},
		{0, 10000, 1, 2}, {0, 10000, 2, 2},
		{2000, 12000, 2, 2},
		{4000, 14000, 3, 1},
		{6000, 16000, 3, 1},
		{8000, 18000, 3, 1},
		{10000, 20000, 3, 1},
	}
	check(t, "q5", got, want)
}

func TestQ7TumbleWindows(t *testing.T) {
	events := []Event{
		bid(1, 1, 5, 0),
		bid(2, 2, 9, 500),
		bid(3, 3, 9, 9999),   // tie with the bid at 500
		bid(4, 4, 99, 10000), // window end: the next window
		bid(5, 5, 1, 19999),
		bid(6, 6, 7, 30000),
	}
	check(t, "q7", Q7(events), []Q7Result{
		{0, 10000, 2, 2, 9, 500},
		{0, 10000, 3, 3, 9, 9999},
		{10000, 20000, 4, 4, 99, 10000},
		{30000, 40000, 6, 6, 7, 30000},
	})
}

func TestQ8(t *testing.T) {
	events := []Event{
		person(1, 100, "a", "OR"),
		auction(10, 1, 10, 9999, 20000, 0), // same window as the join
		auction(11, 1, 10, 5000, 20000, 0), // a second auction: still one result
		person(2, 9999, "b", "OR"),
		auction(12, 2, 10, 10000, 20000, 0), // next window: no result
		person(3, 10000, "c", "OR"),
		auction(13, 3, 10, 19999, 30000, 0),
		person(4, 20000, "d", "OR"), // no auction
	}
	check(t, "q8", Q8(events), []Q8Result{{0, 10000, 1, "a"}, {10000, 20000, 3, "c"}})
}

func TestQ11Sessions(t *testing.T) {
	events := []Event{
		bid(1, 7, 1, 1000),
		bid(1, 7, 1, 10999), // 9999 after: same session
		bid(1, 7, 1, 20999), // exactly the gap after: new session
		bid(1, 8, 1, 5000),
		bid(1, 7, 1, 0), // out of order: extends the first session back
		bid(1, 7, 1, 20999),
	}
	check(t, "q11", Q11(events), []Q11Result{
		{Bidder: 7, BidCount: 3, StartTime: 0, EndTime: 20999},
		{Bidder: 7, BidCount: 2, StartTime: 20999, EndTime: 30999},
		{Bidder: 8, BidCount: 1, StartTime: 5000, EndTime: 15000},
	})
}

func TestResultJSONShapes(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{Q5Result{1, 2, 3, 4}, `{"window_start":1,"window_end":2,"auction":3,"num":4}`},
		{Q7Result{1, 2, 3, 4, 5, 6}, `{"window_start":1,"window_end":2,"auction":3,"bidder":4,"price":5,"dateTime":6}`},
		{Q8Result{1, 2, 3, "n"}, `{"window_start":1,"window_end":2,"id":3,"name":"n"}`},
		{Q11Result{1, 2, 3, 4}, `{"bidder":1,"bid_count":2,"starttime":3,"endtime":4}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T: %s, %v; want %s", tc.v, b, err, tc.want)
		}
	}
}

// TestQueriesOnGeneratedEvents runs every reference over generated events,
// in order and with disorder: the results are non-trivial and do not
// depend on the order of the input (except Q0-Q2, which keep it).
func TestQueriesOnGeneratedEvents(t *testing.T) {
	const n = 100_000
	ordered := generate(t, GeneratorConfig{Seed: 9, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000}, n)
	shuffled := generate(t, GeneratorConfig{Seed: 9, BaseTime: 1_700_000_000_000, EventsPerSecond: 1000, Disorder: 5e9}, n+6000)
	// Keep exactly the same events: those generated before n.
	var same []Event
	for _, e := range shuffled {
		if e.DateTime() < 1_700_000_000_000+n {
			same = append(same, e)
		}
	}
	if len(same) != n {
		t.Fatalf("%d of the first %d events after shuffling", len(same), n)
	}
	for name, q := range map[string]func([]Event) any{
		"q3": func(e []Event) any { return Q3(e) }, "q4": func(e []Event) any { return Q4(e) },
		"q5": func(e []Event) any { return Q5(e) }, "q6": func(e []Event) any { return Q6(e) },
		"q7": func(e []Event) any { return Q7(e) }, "q8": func(e []Event) any { return Q8(e) },
		"q11": func(e []Event) any { return Q11(e) },
	} {
		a, b := q(ordered), q(same)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s depends on input order", name)
		}
		if reflect.ValueOf(a).Len() == 0 {
			t.Errorf("%s: no results over %d generated events", name, n)
		}
	}
	if len(Q1(ordered)) != n/50*46 || len(Q2(ordered)) == 0 {
		t.Errorf("q1 %d results, q2 %d", len(Q1(ordered)), len(Q2(ordered)))
	}
}

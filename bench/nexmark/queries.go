package nexmark

import (
	"cmp"
	"slices"
)

// The batch references below compute each query's complete final result
// over a finite slice of events in plain Go (sorting, grouping, maps),
// independently of the stream library, so that a bounded stream run of the
// query can be compared with them. Event order in the slice does not
// matter except for Q0, Q1 and Q2, which keep it. IDs of persons and
// auctions are assumed unique (the generator's are); bids and auctions may
// reference IDs that never appear, and such references simply find no
// match.
//
// Windows are aligned to the Unix epoch and half-open, [start, end): an
// event at exactly a window's end belongs to the next window.
const (
	// Q5WindowSize and Q5WindowSlide are q5's HOP window: 10 s advancing
	// every 2 s, so each bid is in five windows.
	Q5WindowSize  = 10_000
	Q5WindowSlide = 2_000
	// Q7Window and Q8Window are q7's and q8's TUMBLE windows.
	Q7Window = 10_000
	Q8Window = 10_000
	// Q11Gap is q11's SESSION gap: a session is [first bid, last bid +
	// gap); a bid exactly gap after the previous one starts a new session.
	Q11Gap = 10_000
	// Q1Rate is q1's dollar-to-euro rate.
	Q1Rate = 0.908
	// Q6Auctions is how many of a seller's latest closed auctions q6
	// averages over.
	Q6Auctions = 10
)

// Q0 is the pass-through query: every event unchanged, in input order (the
// output value of each record is its input value).
func Q0(events []Event) []Event { return slices.Clone(events) }

// Q1Result is a bid with its price converted to euros.
type Q1Result struct {
	Auction  int64   `json:"auction"`
	Bidder   int64   `json:"bidder"`
	Price    float64 `json:"price"`
	DateTime int64   `json:"dateTime"`
	Extra    string  `json:"extra"`
}

// Q1 is currency conversion: for every bid, in input order, auction,
// bidder, price*Q1Rate (computed as float64(price)*Q1Rate), dateTime and
// extra (Flink's q1: SELECT auction, bidder, 0.908 * price, dateTime,
// extra FROM bid).
func Q1(events []Event) []Q1Result {
	var out []Q1Result
	for _, b := range bids(events) {
		out = append(out, Q1Result{Auction: b.Auction, Bidder: b.Bidder, Price: float64(b.Price) * Q1Rate, DateTime: b.DateTime, Extra: b.Extra})
	}
	return out
}

// Q2Result is a selected bid's auction and price.
type Q2Result struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

// Q2 is selection: the auction and price of every bid whose auction ID is
// a multiple of 123, in input order (Flink's q2: WHERE MOD(auction, 123) =
// 0).
func Q2(events []Event) []Q2Result {
	var out []Q2Result
	for _, b := range bids(events) {
		if b.Auction%123 == 0 {
			out = append(out, Q2Result{Auction: b.Auction, Price: b.Price})
		}
	}
	return out
}

// Q3Result is a local item suggestion: the seller's name, city and state
// and the auction's ID.
type Q3Result struct {
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
	ID    int64  `json:"id"`
}

// Q3 is local item suggestion, an unwindowed inner join of auctions with
// their sellers: one result for every auction of category 10 whose seller
// is a person in state OR, ID or CA, whichever of the two came first.
// Sorted by auction ID.
func Q3(events []Event) []Q3Result {
	persons := map[int64]*Person{}
	for _, e := range events {
		if e.Type == PersonEvent {
			persons[e.Person.ID] = e.Person
		}
	}
	var out []Q3Result
	for _, a := range auctions(events) {
		if a.Category != 10 {
			continue
		}
		p, ok := persons[a.Seller]
		if !ok || (p.State != "OR" && p.State != "ID" && p.State != "CA") {
			continue
		}
		out = append(out, Q3Result{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
	}
	slices.SortFunc(out, func(x, y Q3Result) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// winningBid is the winner of an auction: the bid with the highest price,
// earliest dateTime on a tie (then lowest bidder), among the bids on it
// with auction.dateTime <= dateTime < auction.expires and price >= reserve
// (Nexmark's WinningBids). Auctions without such a bid have no winner.
type winningBid struct {
	auction *Auction
	bid     *Bid
}

func winningBids(events []Event) []winningBid {
	byID := map[int64]*Auction{}
	for _, a := range auctions(events) {
		byID[a.ID] = a
	}
	best := map[int64]*Bid{}
	for _, b := range bids(events) {
		a, ok := byID[b.Auction]
		if !ok || b.DateTime < a.DateTime || b.DateTime >= a.Expires || b.Price < a.Reserve {
			continue
		}
		cur, ok := best[a.ID]
		if !ok || b.Price > cur.Price ||
			(b.Price == cur.Price && (b.DateTime < cur.DateTime || (b.DateTime == cur.DateTime && b.Bidder < cur.Bidder))) {
			best[a.ID] = b
		}
	}
	out := make([]winningBid, 0, len(best))
	for id, b := range best {
		out = append(out, winningBid{auction: byID[id], bid: b})
	}
	slices.SortFunc(out, func(x, y winningBid) int { return cmp.Compare(x.auction.ID, y.auction.ID) })
	return out
}

// Q4Result is the average winning price of a category.
type Q4Result struct {
	Category int64   `json:"category"`
	Avg      float64 `json:"avg"`
}

// Q4 is the average price per category: for each category, the average of
// the winning prices of its auctions (see winningBids; auctions without a
// winner do not count), as float64(sum)/float64(count). Sorted by
// category. At the end of a bounded input every auction is closed.
func Q4(events []Event) []Q4Result {
	sum, n := map[int64]int64{}, map[int64]int64{}
	for _, w := range winningBids(events) {
		sum[w.auction.Category] += w.bid.Price
		n[w.auction.Category]++
	}
	var out []Q4Result
	for c, s := range sum {
		out = append(out, Q4Result{Category: c, Avg: float64(s) / float64(n[c])})
	}
	slices.SortFunc(out, func(x, y Q4Result) int { return cmp.Compare(x.Category, y.Category) })
	return out
}

// Q5Result is an auction with the most bids in a window.
type Q5Result struct {
	WindowStart int64 `json:"window_start"`
	WindowEnd   int64 `json:"window_end"`
	Auction     int64 `json:"auction"`
	Num         int64 `json:"num"`
}

// Q5 is hot items: for each HOP window (Q5WindowSize advancing by
// Q5WindowSlide) that holds bids, the auction(s) with the most bids in it,
// one result per auction on a tie. Sorted by window start, then auction.
func Q5(events []Event) []Q5Result {
	type key struct{ start, auction int64 }
	counts := map[key]int64{}
	for _, b := range bids(events) {
		for s := floorDiv(b.DateTime, Q5WindowSlide) * Q5WindowSlide; s > b.DateTime-Q5WindowSize; s -= Q5WindowSlide {
			counts[key{s, b.Auction}]++
		}
	}
	most := map[int64]int64{}
	for k, c := range counts {
		most[k.start] = max(most[k.start], c)
	}
	var out []Q5Result
	for k, c := range counts {
		if c == most[k.start] {
			out = append(out, Q5Result{WindowStart: k.start, WindowEnd: k.start + Q5WindowSize, Auction: k.auction, Num: c})
		}
	}
	slices.SortFunc(out, func(x, y Q5Result) int {
		return cmp.Or(cmp.Compare(x.WindowStart, y.WindowStart), cmp.Compare(x.Auction, y.Auction))
	})
	return out
}

// Q6Result is a seller's average selling price.
type Q6Result struct {
	Seller int64   `json:"seller"`
	Avg    float64 `json:"avg"`
}

// Q6 is the average selling price by seller: for each seller with at least
// one auction that has a winner (see winningBids), the average winning
// price of their last Q6Auctions such auctions, ordered by close time
// (expires, then auction ID), as float64(sum)/float64(count). This is the
// final value of Nexmark's q6 once every auction is closed. Sorted by
// seller.
func Q6(events []Event) []Q6Result {
	bySeller := map[int64][]winningBid{}
	for _, w := range winningBids(events) {
		bySeller[w.auction.Seller] = append(bySeller[w.auction.Seller], w)
	}
	var out []Q6Result
	for seller, ws := range bySeller {
		slices.SortFunc(ws, func(x, y winningBid) int {
			return cmp.Or(cmp.Compare(x.auction.Expires, y.auction.Expires), cmp.Compare(x.auction.ID, y.auction.ID))
		})
		last := ws[max(len(ws)-Q6Auctions, 0):]
		var sum int64
		for _, w := range last {
			sum += w.bid.Price
		}
		out = append(out, Q6Result{Seller: seller, Avg: float64(sum) / float64(len(last))})
	}
	slices.SortFunc(out, func(x, y Q6Result) int { return cmp.Compare(x.Seller, y.Seller) })
	return out
}

// Q7Result is a bid with the highest price of its window.
type Q7Result struct {
	WindowStart int64 `json:"window_start"`
	WindowEnd   int64 `json:"window_end"`
	Auction     int64 `json:"auction"`
	Bidder      int64 `json:"bidder"`
	Price       int64 `json:"price"`
	DateTime    int64 `json:"dateTime"`
}

// Q7 is the highest bid: for each TUMBLE window of Q7Window that holds
// bids, every bid in it with the window's highest price (one result per
// bid on a tie). Sorted by window start, then dateTime, auction, bidder.
func Q7(events []Event) []Q7Result {
	byWindow := map[int64][]*Bid{}
	for _, b := range bids(events) {
		s := floorDiv(b.DateTime, Q7Window) * Q7Window
		byWindow[s] = append(byWindow[s], b)
	}
	var out []Q7Result
	for s, bs := range byWindow {
		top := bs[0].Price
		for _, b := range bs {
			top = max(top, b.Price)
		}
		for _, b := range bs {
			if b.Price == top {
				out = append(out, Q7Result{WindowStart: s, WindowEnd: s + Q7Window, Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime})
			}
		}
	}
	slices.SortFunc(out, func(x, y Q7Result) int {
		return cmp.Or(cmp.Compare(x.WindowStart, y.WindowStart), cmp.Compare(x.DateTime, y.DateTime),
			cmp.Compare(x.Auction, y.Auction), cmp.Compare(x.Bidder, y.Bidder))
	})
	return out
}

// Q8Result is a new user who opened an auction in the window they joined.
type Q8Result struct {
	WindowStart int64  `json:"window_start"`
	WindowEnd   int64  `json:"window_end"`
	ID          int64  `json:"id"`
	Name        string `json:"name"`
}

// Q8 is monitor new users: for each TUMBLE window of Q8Window, one result
// per person (id, name) who joined in the window and is the seller of at
// least one auction opened in the same window. Sorted by window start,
// then id.
func Q8(events []Event) []Q8Result {
	type sellerWindow struct{ start, seller int64 }
	opened := map[sellerWindow]bool{}
	for _, a := range auctions(events) {
		opened[sellerWindow{floorDiv(a.DateTime, Q8Window) * Q8Window, a.Seller}] = true
	}
	seen := map[Q8Result]bool{}
	var out []Q8Result
	for _, e := range events {
		if e.Type != PersonEvent {
			continue
		}
		p := e.Person
		s := floorDiv(p.DateTime, Q8Window) * Q8Window
		r := Q8Result{WindowStart: s, WindowEnd: s + Q8Window, ID: p.ID, Name: p.Name}
		if opened[sellerWindow{s, p.ID}] && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y Q8Result) int {
		return cmp.Or(cmp.Compare(x.WindowStart, y.WindowStart), cmp.Compare(x.ID, y.ID), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// Q11Result is one bidder's session.
type Q11Result struct {
	Bidder    int64 `json:"bidder"`
	BidCount  int64 `json:"bid_count"`
	StartTime int64 `json:"starttime"`
	EndTime   int64 `json:"endtime"`
}

// Q11 is user sessions: each bidder's bids grouped into SESSION windows
// with gap Q11Gap. A session is [first bid, last bid + gap): a bid joins
// the session when it is less than gap after the session's latest bid, and
// a bid exactly gap (or more) after it starts a new session. One result
// per session with its bid count, starttime = first bid, endtime = last
// bid + gap. Sorted by bidder, then starttime.
func Q11(events []Event) []Q11Result {
	times := map[int64][]int64{}
	for _, b := range bids(events) {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var out []Q11Result
	for bidder, ts := range times {
		slices.Sort(ts)
		cur := Q11Result{Bidder: bidder, BidCount: 1, StartTime: ts[0], EndTime: ts[0] + Q11Gap}
		for _, t := range ts[1:] {
			if t >= cur.EndTime {
				out = append(out, cur)
				cur = Q11Result{Bidder: bidder, StartTime: t}
			}
			cur.BidCount++
			cur.EndTime = t + Q11Gap
		}
		out = append(out, cur)
	}
	slices.SortFunc(out, func(x, y Q11Result) int {
		return cmp.Or(cmp.Compare(x.Bidder, y.Bidder), cmp.Compare(x.StartTime, y.StartTime))
	})
	return out
}

func bids(events []Event) []*Bid {
	var out []*Bid
	for _, e := range events {
		if e.Type == BidEvent {
			out = append(out, e.Bid)
		}
	}
	return out
}

func auctions(events []Event) []*Auction {
	var out []*Auction
	for _, e := range events {
		if e.Type == AuctionEvent {
			out = append(out, e.Auction)
		}
	}
	return out
}

// floorDiv is a/b rounded towards minus infinity (b > 0), so windows
// before the epoch are aligned like those after it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

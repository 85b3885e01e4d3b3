package nexmark

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The generator follows the rules of the original Nexmark generator (as
// kept in Apache Beam's and Flink's Nexmark suites); the constants below are
// the standard ones.
const (
	// Out of every TotalProportion consecutive events, PersonProportion are
	// persons, then AuctionProportion auctions, then BidProportion bids.
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion

	// FirstPersonID and FirstAuctionID are the IDs of the first person and
	// auction; IDs then count up by one per generated person or auction.
	FirstPersonID  = 1000
	FirstAuctionID = 1000
	// Categories are FirstCategoryID ... FirstCategoryID+NumCategories-1.
	FirstCategoryID = 10
	NumCategories   = 5

	// A bid goes to a hot auction with probability 1 - 1/hotAuctionRatio,
	// an auction is sold by a hot seller with probability
	// 1 - 1/hotSellerRatio, a bid is made by a hot bidder with probability
	// 1 - 1/hotBidderRatio. The hot auction (seller, bidder) is the newest
	// one whose base-0 ID is a multiple of hotIDModulus, so one ID stays
	// hot for hotIDModulus new auctions (persons).
	hotAuctionRatio = 2
	hotSellerRatio  = 4
	hotBidderRatio  = 4
	hotIDModulus    = 100

	// Other bids and auctions pick among the numActivePeople newest persons
	// and the numInFlightAuctions newest auctions, plus a small lead of IDs
	// that do not exist yet (bids and sellers that reference the future, as
	// in Nexmark).
	numActivePeople     = 1000
	numInFlightAuctions = 100
	personIDLead        = 10
	auctionIDLead       = 10

	// Average JSON sizes the Extra field pads persons, auctions and bids to.
	avgPersonBytes  = 200
	avgAuctionBytes = 500
	avgBidBytes     = 100
)

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	channels   = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// GeneratorConfig configures a Generator. The events are a pure function
// of the whole config: the same config yields the same events in the same
// order.
type GeneratorConfig struct {
	// Seed selects the random choices.
	Seed uint64
	// BaseTime is the dateTime of the first event, Unix ms.
	BaseTime int64
	// EventsPerSecond is the rate of event time: event n (from 0) has
	// dateTime BaseTime + n*1000/EventsPerSecond (integer division), before
	// any disorder. Zero means 10,000.
	EventsPerSecond int64
	// Disorder, when positive, shuffles the order in which events are
	// returned within a bound: no returned event's dateTime is more than
	// Disorder behind the largest dateTime returned before it. dateTimes
	// themselves are unchanged. Millisecond precision.
	Disorder time.Duration
}

// Generator produces an endless, deterministic sequence of Nexmark
// events. A Generator is not safe for concurrent use.
type Generator struct {
	cfg        GeneratorConfig
	disorderMs int64
	next       int64 // number of the next event to generate
	rng        *rand.Rand
	pcg        *rand.PCG
	pending    pendingHeap // events held back by the disorder, by release time
}

// NewGenerator returns a Generator for cfg.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	if cfg.EventsPerSecond == 0 {
		cfg.EventsPerSecond = 10_000
	}
	if cfg.EventsPerSecond < 0 || cfg.EventsPerSecond > 1_000_000_000 {
		return nil, fmt.Errorf("nexmark: events per second %d out of range (1 to 1e9)", cfg.EventsPerSecond)
	}
	if cfg.Disorder < 0 {
		return nil, fmt.Errorf("nexmark: negative disorder %v", cfg.Disorder)
	}
	pcg := rand.NewPCG(0, 0)
	return &Generator{cfg: cfg, disorderMs: cfg.Disorder.Milliseconds(), rng: rand.New(pcg), pcg: pcg}, nil
}

// Next returns the next event.
//
// With a disorder D, each event n is given a random delay d_n in [0, D]
// and events are returned in order of t_n + d_n (ties by n). An event f
// returned before e has t_f <= t_f + d_f <= t_e + d_e <= t_e + D, which is
// the bound GeneratorConfig.Disorder promises. An event is released once
// the next in-order event's time reaches its t + d, so at most about
// D*EventsPerSecond events are held back.
func (g *Generator) Next() Event {
	if g.disorderMs <= 0 {
		e, _ := g.generate()
		return e
	}
	for {
		if len(g.pending) > 0 && g.pending[0].release <= g.timeOf(g.next) {
			return heap.Pop(&g.pending).(pendingEvent).event
		}
		n := g.next
		e, rng := g.generate()
		delay := rng.Int64N(g.disorderMs + 1)
		heap.Push(&g.pending, pendingEvent{release: e.DateTime() + delay, n: n, event: e})
	}
}

// timeOf is the dateTime of event n.
func (g *Generator) timeOf(n int64) int64 {
	return g.cfg.BaseTime + n*1000/g.cfg.EventsPerSecond
}

// generate makes event g.next and advances. Each event's random choices
// come from a generator seeded by (Seed, event number), so an event does
// not depend on how many random numbers earlier events drew. It returns
// that generator for further per-event draws.
func (g *Generator) generate() (Event, *rand.Rand) {
	n := g.next
	g.next++
	g.pcg.Seed(g.cfg.Seed, uint64(n))
	r := g.rng
	t := g.timeOf(n)
	switch offset := n % TotalProportion; {
	case offset < PersonProportion:
		return Event{Type: PersonEvent, Person: g.person(r, n, t)}, r
	case offset < PersonProportion+AuctionProportion:
		return Event{Type: AuctionEvent, Auction: g.auction(r, n, t)}, r
	default:
		return Event{Type: BidEvent, Bid: g.bid(r, n, t)}, r
	}
}

// lastPerson is the base-0 ID of the newest person generated at or before
// event n.
func lastPerson(n int64) int64 {
	epoch, offset := n/TotalProportion, n%TotalProportion
	return epoch*PersonProportion + min(offset, PersonProportion-1)
}

// lastAuction is the base-0 ID of the newest auction generated at or before
// event n (0 before the first auction).
func lastAuction(n int64) int64 {
	epoch, offset := n/TotalProportion, n%TotalProportion
	if offset < PersonProportion {
		// Before this epoch's auctions: the previous epoch's last one.
		if epoch == 0 {
			return 0
		}
		return (epoch-1)*AuctionProportion + AuctionProportion - 1
	}
	offset -= PersonProportion
	if offset >= AuctionProportion {
		offset = AuctionProportion - 1
	}
	return epoch*AuctionProportion + offset
}

// otherPerson picks a base-0 person ID among the active persons at event n
// and a few not yet generated.
func otherPerson(r *rand.Rand, n int64) int64 {
	people := lastPerson(n) + 1
	active := min(people, numActivePeople)
	return people - active + r.Int64N(active+personIDLead)
}

// otherAuction picks a base-0 auction ID among the in-flight auctions at
// event n and a few not yet generated.
func otherAuction(r *rand.Rand, n int64) int64 {
	last := lastAuction(n)
	lo := max(last-numInFlightAuctions, 0)
	return lo + r.Int64N(last-lo+1+auctionIDLead)
}

// price is log-uniform between 1 and 1e8 cents-ish units, as in Nexmark.
func price(r *rand.Rand) int64 {
	return int64(math.Round(math.Pow(10, r.Float64()*6) * 100))
}

func (g *Generator) person(r *rand.Rand, n, t int64) *Person {
	id := lastPerson(n) + FirstPersonID
	name := firstNames[r.IntN(len(firstNames))] + " " + lastNames[r.IntN(len(lastNames))]
	p := &Person{
		ID:           id,
		Name:         name,
		EmailAddress: randomString(r, 7) + "@" + randomString(r, 5) + ".com",
		CreditCard:   fmt.Sprintf("%04d %04d %04d %04d", r.IntN(10000), r.IntN(10000), r.IntN(10000), r.IntN(10000)),
		City:         usCities[r.IntN(len(usCities))],
		State:        usStates[r.IntN(len(usStates))],
		DateTime:     t,
	}
	p.Extra = extra(r, 120+len(p.Name)+len(p.EmailAddress)+len(p.City), avgPersonBytes)
	return p
}

func (g *Generator) auction(r *rand.Rand, n, t int64) *Auction {
	id := lastAuction(n) + FirstAuctionID
	var seller int64
	if r.IntN(hotSellerRatio) > 0 {
		seller = lastPerson(n) / hotIDModulus * hotIDModulus
	} else {
		seller = otherPerson(r, n)
	}
	initial := price(r)
	a := &Auction{
		ID:          id,
		ItemName:    randomString(r, 20),
		Description: randomString(r, 100),
		InitialBid:  initial,
		Reserve:     initial + price(r),
		DateTime:    t,
		Expires:     t + g.auctionLength(r, n),
		Seller:      seller + FirstPersonID,
		Category:    FirstCategoryID + int64(r.IntN(NumCategories)),
	}
	a.Extra = extra(r, 300, avgAuctionBytes)
	return a
}

// auctionLength is how long an auction opened at event n stays open: up to
// twice the event time in which numInFlightAuctions more auctions open, so
// about that many auctions are open at once whatever the event rate.
func (g *Generator) auctionLength(r *rand.Rand, n int64) int64 {
	eventsForAuctions := int64(numInFlightAuctions * TotalProportion / AuctionProportion)
	horizon := g.timeOf(n+eventsForAuctions) - g.timeOf(n)
	return 1 + r.Int64N(max(horizon*2, 1))
}

func (g *Generator) bid(r *rand.Rand, n, t int64) *Bid {
	var auction, bidder int64
	if r.IntN(hotAuctionRatio) > 0 {
		auction = lastAuction(n) / hotIDModulus * hotIDModulus
	} else {
		auction = otherAuction(r, n)
	}
	if r.IntN(hotBidderRatio) > 0 {
		// +1: the hot bidder is not the hot seller.
		bidder = lastPerson(n)/hotIDModulus*hotIDModulus + 1
	} else {
		bidder = otherPerson(r, n)
	}
	ch := r.IntN(len(channels))
	b := &Bid{
		Auction:  auction + FirstAuctionID,
		Bidder:   bidder + FirstPersonID,
		Price:    price(r),
		Channel:  channels[ch],
		URL:      "https://www." + strings.ToLower(channels[ch]) + ".com/search?q=" + randomString(r, 8) + "&channel_id=" + strconv.Itoa(r.IntN(10000)),
		DateTime: t,
	}
	b.Extra = extra(r, 130+len(b.URL), avgBidBytes)
	return b
}

const letters = "abcdefghijklmnopqrstuvwxyz"

func randomString(r *rand.Rand, maxLen int) string {
	n := 1 + r.IntN(maxLen)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// extra pads an event of about size bytes towards an average of want
// bytes: a random string of want-size bytes +-20%, or "" if already there.
func extra(r *rand.Rand, size, want int) string {
	if size >= want {
		return ""
	}
	need := want - size
	delta := need / 5
	n := need - delta + r.IntN(2*delta+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

type pendingEvent struct {
	release int64
	n       int64
	event   Event
}

// pendingHeap orders held-back events by release time, then event number.
type pendingHeap []pendingEvent

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if h[i].release != h[j].release {
		return h[i].release < h[j].release
	}
	return h[i].n < h[j].n
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pendingEvent)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

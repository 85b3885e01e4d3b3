package nexmark

import (
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/stream"
)

// closedAuction is a closed auction with the price of its winning bid:
// what q4 and q6 aggregate.
type closedAuction struct {
	ID       int64 `json:"id"`
	Seller   int64 `json:"seller"`
	Category int64 `json:"category"`
	Expires  int64 `json:"expires"`
	Price    int64 `json:"price"`
}

// openAuction is the state of an auction the closing processor saw and
// has not closed: the fields of the auction that decide its winner, and
// the best valid bid so far (HasBest false: none).
type openAuction struct {
	ID       int64 `json:"id"`
	Seller   int64 `json:"seller"`
	Category int64 `json:"category"`
	DateTime int64 `json:"dateTime"`
	Expires  int64 `json:"expires"`
	Reserve  int64 `json:"reserve"`
	HasBest  bool  `json:"hasBest"`
	Best     offer `json:"best"`
}

// offer is what of a bid decides whether it wins.
type offer struct {
	Price    int64 `json:"price"`
	DateTime int64 `json:"dateTime"`
	Bidder   int64 `json:"bidder"`
}

// closeAuctions is Nexmark's WinningBids as a stream processor: the winner of
// every auction — the bid with the highest price (then the earliest, then
// the lowest bidder) among those on it with dateTime in [auction dateTime,
// expires) and price >= reserve — emitted when the auction closes, that is
// when the watermark reaches its expires. Auctions and bids are
// repartitioned by auction ID so that both sides of an auction meet in one
// task.
//
// A bid can arrive before its auction: the input is out of order, and the
// input partitions' tasks run at their own pace, so a new auction's first
// bids can reach this processor before it. Such a bid waits in the window
// store "<name>-early", in the window [dateTime, dateTime+1) of its
// auction, so that the auction, when it comes, reads the bids of its own
// time range in one scan. No auction arriving now can have a dateTime
// behind the watermark (an on-time record never is), so once the
// watermark passes a waiting bid it can never count: a timer per waiting
// dateTime deletes its window then. A closed auction leaves a marker in
// "<name>-closed" for closedTTL of event time, so that the bids that keep
// coming for it (Nexmark's hot auctions stay hot after they close) are
// dropped at once; after the TTL they wait and are dropped as those of an
// auction that never comes — slower, never wrong. The open auctions are
// bounded by their close timers.
func closeAuctions(b *stream.Builder, in, name string) stream.Stream[int64, closedAuction] {
	ev := events(b, in)
	auctions := stream.KeyBy(ev.Filter(isAuction), func(r stream.Record[[]byte, Event]) (int64, error) {
		return r.Value.Auction.ID, nil
	})
	bids := stream.KeyBy(ev.Filter(isBid), func(r stream.Record[[]byte, Event]) (int64, error) {
		return r.Value.Bid.Auction, nil
	})
	open := stream.KeyValueStore[int64, openAuction](stream.StoreConfig{Name: name + "-open",
		NoExpiry: "one key per open auction, deleted when the auction closes (a timer at its expires)"})
	early := stream.KeyValueWindowStore[int64, []offer](stream.StoreConfig{Name: name + "-early",
		NoExpiry: "bids ahead of their auction, each deleted by a timer when the watermark passes it"})
	closed := stream.KeyValueStore[int64, int64](stream.StoreConfig{Name: name + "-closed", TTL: closedTTL})
	const closeTimer, dropTimer = "close", "drop:" // drop:<dateTime of the waiting bids>
	type ctx = stream.ProcessContext[int64, int64, closedAuction]
	return stream.Process(auctions.Merge(bids), stream.ProcessConfig{Name: name, Stores: []stream.ProcessStore{open, early, closed}},
		stream.Processor[int64, Event, int64, closedAuction]{
			OnRecord: func(c *ctx, r stream.Record[int64, Event]) error {
				if a := r.Value.Auction; a != nil {
					oa := openAuction{ID: a.ID, Seller: a.Seller, Category: a.Category, DateTime: a.DateTime,
						Expires: a.Expires, Reserve: a.Reserve}
					waiting, err := early.Fetch(c, a.ID, time.UnixMilli(a.DateTime), time.UnixMilli(a.Expires))
					if err != nil {
						return err
					}
					for _, w := range waiting {
						for _, o := range w.Value {
							oa.offer(o)
						}
					}
					if err := open.Put(c, a.ID, oa); err != nil {
						return err
					}
					return c.SetEventTimer(a.ID, closeTimer, time.UnixMilli(a.Expires))
				}
				bid := r.Value.Bid
				o := offer{Price: bid.Price, DateTime: bid.DateTime, Bidder: bid.Bidder}
				oa, found, err := open.Get(c, bid.Auction)
				if err != nil {
					return err
				}
				if found {
					if oa.offer(o) {
						return open.Put(c, bid.Auction, oa)
					}
					return nil
				}
				if _, done, err := closed.Get(c, bid.Auction); err != nil || done {
					return err
				}
				at, next := time.UnixMilli(bid.DateTime), time.UnixMilli(bid.DateTime+1)
				waiting, _, err := early.Get(c, bid.Auction, at, next)
				if err != nil {
					return err
				}
				if err := early.Put(c, bid.Auction, at, next, append(waiting, o)); err != nil {
					return err
				}
				return c.SetEventTimer(bid.Auction, dropTimer+strconv.FormatInt(bid.DateTime, 10), next)
			},
			OnTimer: func(c *ctx, tm stream.Timer[int64]) error {
				if t, ok := strings.CutPrefix(tm.Name, dropTimer); ok {
					ms, err := strconv.ParseInt(t, 10, 64)
					if err != nil {
						return err
					}
					return early.Delete(c, tm.Key, time.UnixMilli(ms), time.UnixMilli(ms+1))
				}
				oa, found, err := open.Get(c, tm.Key)
				if err != nil || !found {
					return err
				}
				if err := open.Delete(c, tm.Key); err != nil {
					return err
				}
				if err := closed.Put(c, tm.Key, oa.Expires); err != nil {
					return err
				}
				if !oa.HasBest {
					return nil
				}
				return c.Forward(stream.Record[int64, closedAuction]{Key: tm.Key, Value: closedAuction{
					ID: oa.ID, Seller: oa.Seller, Category: oa.Category, Expires: oa.Expires, Price: oa.Best.Price}})
			},
		}, stream.Codecs(stream.Int64(), EventCodec()))
}

// closedTTL is how long a closed auction's marker is kept (event time). The
// generator's hot auction changes every 100 auctions (1,667 events): at its
// default rate, 0.17 s of event time.
const closedTTL = time.Minute

// offer makes o the auction's best bid if it is valid for the auction
// and beats the best so far; it reports whether it did.
func (oa *openAuction) offer(o offer) bool {
	if o.DateTime < oa.DateTime || o.DateTime >= oa.Expires || o.Price < oa.Reserve {
		return false
	}
	if cur := oa.Best; oa.HasBest && !(o.Price > cur.Price || (o.Price == cur.Price &&
		(o.DateTime < cur.DateTime || (o.DateTime == cur.DateTime && o.Bidder < cur.Bidder)))) {
		return false
	}
	oa.Best, oa.HasBest = o, true
	return true
}

// isAuction keeps the auctions of the event stream.
func isAuction(r stream.Record[[]byte, Event]) (bool, error) {
	return r.Value.Type == AuctionEvent, nil
}

// isPerson keeps the persons of the event stream.
func isPerson(r stream.Record[[]byte, Event]) (bool, error) { return r.Value.Type == PersonEvent, nil }

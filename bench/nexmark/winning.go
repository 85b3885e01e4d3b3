package nexmark

import (
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
// A bid can arrive before its auction (the input is out of order). It then
// waits in the store "<name>-early" until the auction arrives; once the
// watermark passed the bid's dateTime no auction it could count for can
// arrive (an on-time record is never behind the watermark), so a timer
// drops the bids of an auction that never came. Both stores are bounded by
// timers: an open auction is deleted at its close, early bids when their
// drop timer fires.
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
	early := stream.KeyValueStore[int64, []offer](stream.StoreConfig{Name: name + "-early",
		NoExpiry: "bids ahead of their auction, deleted when it arrives or the watermark passes them (a timer)"})
	const closeTimer, dropTimer = "close", "drop"
	type ctx = stream.ProcessContext[int64, int64, closedAuction]
	return stream.Process(auctions.Merge(bids), stream.ProcessConfig{Name: name, Stores: []stream.ProcessStore{open, early}},
		stream.Processor[int64, Event, int64, closedAuction]{
			OnRecord: func(c *ctx, r stream.Record[int64, Event]) error {
				if a := r.Value.Auction; a != nil {
					oa := openAuction{ID: a.ID, Seller: a.Seller, Category: a.Category, DateTime: a.DateTime,
						Expires: a.Expires, Reserve: a.Reserve}
					waiting, _, err := early.Get(c, a.ID)
					if err != nil {
						return err
					}
					for _, o := range waiting {
						oa.offer(o)
					}
					if len(waiting) > 0 {
						if err := early.Delete(c, a.ID); err != nil {
							return err
						}
						if err := c.DeleteEventTimer(a.ID, dropTimer); err != nil {
							return err
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
				waiting, _, err := early.Get(c, bid.Auction)
				if err != nil {
					return err
				}
				latest := bid.DateTime
				for _, w := range waiting {
					latest = max(latest, w.DateTime)
				}
				if err := early.Put(c, bid.Auction, append(waiting, o)); err != nil {
					return err
				}
				return c.SetEventTimer(bid.Auction, dropTimer, time.UnixMilli(latest+1))
			},
			OnTimer: func(c *ctx, tm stream.Timer[int64]) error {
				if tm.Name == dropTimer {
					return early.Delete(c, tm.Key)
				}
				oa, found, err := open.Get(c, tm.Key)
				if err != nil || !found {
					return err
				}
				if err := open.Delete(c, tm.Key); err != nil {
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

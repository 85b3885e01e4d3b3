package nexmark

import (
	"encoding/binary"
	"fmt"
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
// watermark passes a waiting bid it can never count: one timer per auction
// and dropBucket of dateTimes deletes their windows at the bucket's end.
// (An auction later than the out-of-orderness misses the bids that waited
// for it, and a bid later than that on a closed auction is not counted:
// the results are exact for input within the bound.) A closed auction
// leaves a marker in "<name>-closed" for closedTTL of event time, so that
// the bids that keep coming for it (Nexmark's hot auctions stay hot after
// they close) are dropped at once; after the TTL they wait and are
// dropped as those of an auction that never comes — slower, never wrong.
// The open auctions are bounded by their close timers.
//
// Only what decides a winner crosses the repartition topic (a lot, in a
// fixed-size binary codec), not the whole event.
func closeAuctions(b *stream.Builder, in, name string) stream.Stream[int64, closedAuction] {
	ev := events(b, in, AuctionEvent, BidEvent)
	byAuction := stream.KeyBy(ev, func(r stream.Record[[]byte, Event]) (int64, error) {
		if a := r.Value.Auction; a != nil {
			return a.ID, nil
		}
		return r.Value.Bid.Auction, nil
	})
	lots := stream.MapValues(byAuction, func(r stream.Record[int64, Event]) (lot, error) {
		if a := r.Value.Auction; a != nil {
			return lot{Auction: &openAuction{ID: a.ID, Seller: a.Seller, Category: a.Category, DateTime: a.DateTime,
				Expires: a.Expires, Reserve: a.Reserve}}, nil
		}
		bid := r.Value.Bid
		return lot{Bid: offer{Price: bid.Price, DateTime: bid.DateTime, Bidder: bid.Bidder}}, nil
	})
	open := stream.KeyValueStore(stream.StoreConfig{Name: name + "-open",
		NoExpiry: "one key per open auction, deleted when the auction closes (a timer at its expires)"},
		stream.Codecs(stream.Int64(), stream.Codec[openAuction](openAuctionCodec{})))
	early := stream.KeyValueWindowStore(stream.StoreConfig{Name: name + "-early",
		NoExpiry: "bids ahead of their auction, deleted by a timer once the watermark passes them"},
		stream.Codecs(stream.Int64(), stream.Codec[[]offer](offersCodec{})))
	closed := stream.KeyValueStore[int64, int64](stream.StoreConfig{Name: name + "-closed", TTL: closedTTL})
	const closeTimer, dropTimer = "close", "drop:" // drop:<end of the dropBucket of the waiting bids>
	type ctx = stream.ProcessContext[int64, int64, closedAuction]
	return stream.Process(lots, stream.ProcessConfig{Name: name, Stores: []stream.ProcessStore{open, early, closed}},
		stream.Processor[int64, lot, int64, closedAuction]{
			OnRecord: func(c *ctx, r stream.Record[int64, lot]) error {
				if a := r.Value.Auction; a != nil {
					// An auction seen again (at-least-once replays it after
					// a crash) keeps what it has: its best bid so far, or
					// its close.
					if _, found, err := open.Get(c, a.ID); err != nil || found {
						return err
					}
					if _, done, err := closed.Get(c, a.ID); err != nil || done {
						return err
					}
					oa := *a
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
				o, auction := r.Value.Bid, r.Key
				oa, found, err := open.Get(c, auction)
				if err != nil {
					return err
				}
				if found {
					if oa.offer(o) {
						return open.Put(c, auction, oa)
					}
					return nil
				}
				if _, done, err := closed.Get(c, auction); err != nil || done {
					return err
				}
				at, next := time.UnixMilli(o.DateTime), time.UnixMilli(o.DateTime+1)
				waiting, _, err := early.Get(c, auction, at, next)
				if err != nil {
					return err
				}
				if err := early.Put(c, auction, at, next, append(waiting, o)); err != nil {
					return err
				}
				// One timer per auction and bucket: setting it again at the
				// same time writes nothing.
				end := (floorDiv(o.DateTime, dropBucket) + 1) * dropBucket
				return c.SetEventTimer(auction, dropTimer+strconv.FormatInt(end, 10), time.UnixMilli(end))
			},
			OnTimer: func(c *ctx, tm stream.Timer[int64]) error {
				if t, ok := strings.CutPrefix(tm.Name, dropTimer); ok {
					end, err := strconv.ParseInt(t, 10, 64)
					if err != nil {
						return err
					}
					dead, err := early.Fetch(c, tm.Key, time.UnixMilli(end-dropBucket), time.UnixMilli(end))
					if err != nil {
						return err
					}
					for _, w := range dead {
						if err := early.Delete(c, tm.Key, w.Start, w.End); err != nil {
							return err
						}
					}
					return nil
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
		}, stream.Codecs(stream.Int64(), stream.Codec[lot](lotCodec{})))
}

// offersCodec encodes offers as the three fields of each, big-endian
// int64s.
type offersCodec struct{}

func (offersCodec) Encode(os []offer) ([]byte, error) {
	b := make([]byte, 0, 24*len(os))
	for _, o := range os {
		b = appendInts(b, o.Price, o.DateTime, o.Bidder)
	}
	return b, nil
}

func (offersCodec) Decode(b []byte) ([]offer, error) {
	if len(b)%24 != 0 {
		return nil, fmt.Errorf("nexmark: offers of %d bytes", len(b))
	}
	v := readInts(b, len(b)/8)
	os := make([]offer, 0, len(b)/24)
	for i := 0; i < len(v); i += 3 {
		os = append(os, offer{Price: v[i], DateTime: v[i+1], Bidder: v[i+2]})
	}
	return os, nil
}

// lot is an auction or a bid as the closing processor needs it: Auction
// set for an auction, else Bid (its auction is the record's key).
type lot struct {
	Auction *openAuction
	Bid     offer
}

// lotCodec encodes a lot as 'a' and the auction's six fields, or 'b' and
// the bid's three, each a big-endian int64.
type lotCodec struct{}

func (lotCodec) Encode(l lot) ([]byte, error) {
	if a := l.Auction; a != nil {
		return appendInts([]byte{'a'}, a.ID, a.Seller, a.Category, a.DateTime, a.Expires, a.Reserve), nil
	}
	return appendInts([]byte{'b'}, l.Bid.Price, l.Bid.DateTime, l.Bid.Bidder), nil
}

func (lotCodec) Decode(b []byte) (lot, error) {
	switch {
	case len(b) == 1+6*8 && b[0] == 'a':
		v := readInts(b[1:], 6)
		return lot{Auction: &openAuction{ID: v[0], Seller: v[1], Category: v[2], DateTime: v[3], Expires: v[4], Reserve: v[5]}}, nil
	case len(b) == 1+3*8 && b[0] == 'b':
		v := readInts(b[1:], 3)
		return lot{Bid: offer{Price: v[0], DateTime: v[1], Bidder: v[2]}}, nil
	}
	return lot{}, fmt.Errorf("nexmark: not an auction or bid lot (%d bytes)", len(b))
}

// openAuctionCodec encodes an open auction as its six auction fields, then
// 1 and its best bid's three (or 0), each field a big-endian int64.
type openAuctionCodec struct{}

func (openAuctionCodec) Encode(a openAuction) ([]byte, error) {
	b := appendInts(make([]byte, 0, 10*8), a.ID, a.Seller, a.Category, a.DateTime, a.Expires, a.Reserve)
	if !a.HasBest {
		return appendInts(b, 0), nil
	}
	return appendInts(b, 1, a.Best.Price, a.Best.DateTime, a.Best.Bidder), nil
}

func (openAuctionCodec) Decode(b []byte) (openAuction, error) {
	if len(b) != 7*8 && len(b) != 10*8 {
		return openAuction{}, fmt.Errorf("nexmark: open auction of %d bytes", len(b))
	}
	v := readInts(b, len(b)/8)
	if has := int64(len(v) / 10); v[6] != has { // 0 for 7 fields, 1 for 10
		return openAuction{}, fmt.Errorf("nexmark: open auction of %d bytes with best-bid flag %d", len(b), v[6])
	}
	a := openAuction{ID: v[0], Seller: v[1], Category: v[2], DateTime: v[3], Expires: v[4], Reserve: v[5], HasBest: v[6] == 1}
	if a.HasBest {
		a.Best = offer{Price: v[7], DateTime: v[8], Bidder: v[9]}
	}
	return a, nil
}

func appendInts(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// readInts reads n big-endian int64s from b (len(b) >= 8n).
func readInts(b []byte, n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
	}
	return v
}

// dropBucket groups the waiting bids of an auction by dateTime (aligned to
// the epoch, in ms) under one drop timer, firing at the bucket's end.
const dropBucket = 1000

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

package nexmark

import (
	"slices"
	"time"

	"github.com/weirhq/weir/stream"
)

// q7 is the highest bid: for each TUMBLE window of Q7Window, every bid with
// the window's highest price (one Q7Result per bid on a tie). The output is
// keyed by the window's start (Int64).
//
// Two windowed stages, each emitting a window's result once, when the
// watermark closes it (a local and a global aggregation):
//
//  1. the highest bids of each window in each input partition: grouped
//     by the input's key (empty in the event format), which no operator
//     changed, so there is no repartition and each task aggregates the
//     bids of its own partition. A result carries its window's last
//     instant (end - 1 ms) as its timestamp;
//  2. those partial results, keyed by their window's start (a
//     repartition), combined per window. They fall in the very window
//     they summarise, which closes when the watermark passes its end. The
//     watermark crosses the repartition topic behind them, so by then
//     every partition's result for the window has arrived.
func q7(b *stream.Builder, in, out string, _ Options) error {
	window := stream.Tumbling(Q7Window * time.Millisecond)
	highestCodec := sliceOf(q7Codec) // the aggregates' binary codec, cheaper than JSON
	bids := stream.MapValues(events(b, in, BidEvent), func(r stream.Record[[]byte, Event]) (Q7Result, error) {
		bid := r.Value.Bid
		return Q7Result{Auction: bid.Auction, Bidder: bid.Bidder, Price: bid.Price, DateTime: bid.DateTime}, nil
	})
	local := stream.WindowedAggregate(stream.GroupByKey(bids), window,
		stream.WindowedStore{Name: "q7-local-highest", Late: stream.DropLate(), Emit: stream.EmitFinal()},
		nil, func(r stream.Record[[]byte, Q7Result], top []Q7Result) ([]Q7Result, error) {
			return highestBids(top, r.Value), nil
		}, nil, stream.Codecs(stream.Bytes(), highestCodec))

	byWindow := stream.GroupBy(local.ToStream(), func(r stream.Record[stream.Windowed[[]byte], []Q7Result]) (int64, error) {
		return r.Key.Start.UnixMilli(), nil
	}, stream.Codecs(stream.Int64(), highestCodec))
	highest := stream.WindowedAggregate(byWindow, window,
		stream.WindowedStore{Name: "q7-highest", Late: stream.DropLate(), Emit: stream.EmitFinal()},
		nil, func(r stream.Record[int64, []Q7Result], top []Q7Result) ([]Q7Result, error) {
			for _, bid := range r.Value {
				top = highestBids(top, bid)
			}
			return top, nil
		}, nil, stream.Codecs(stream.Int64(), highestCodec))

	results := stream.FlatMapValues(highest.ToStream(), func(r stream.Record[stream.Windowed[int64], []Q7Result]) ([]Q7Result, error) {
		out := make([]Q7Result, len(r.Value))
		for i, bid := range r.Value {
			bid.WindowStart, bid.WindowEnd = r.Key.Start.UnixMilli(), r.Key.End.UnixMilli()
			out[i] = bid
		}
		return out, nil
	})
	stream.KeyBy(results, func(r stream.Record[stream.Windowed[int64], Q7Result]) (int64, error) { return r.Key.Key, nil }).
		To(out, stream.Int64(), stream.JSON[Q7Result]())
	return nil
}

// highestBids adds bid to top, the highest-priced bids so far (all of one
// price): bid replaces them if higher, joins them if as high. top is not
// modified (an aggregate is a value).
func highestBids(top []Q7Result, bid Q7Result) []Q7Result {
	switch {
	case len(top) == 0 || bid.Price > top[0].Price:
		return []Q7Result{bid}
	case bid.Price == top[0].Price:
		return append(slices.Clip(top), bid)
	}
	return top
}

package nexmark

import (
	"slices"
	"time"

	"github.com/weirhq/weir/stream"
)

// q5 is hot items: for each HOP window (Q5WindowSize advancing by
// Q5WindowSlide), the auction(s) with the most bids in it, one Q5Result
// per auction on a tie. The output is keyed by the window's start (Int64).
//
// A maximum over a whole window needs every count of that window in one
// place, so the query runs in windowed stages, each emitting a window's
// result once, when the watermark closes it:
//
//  1. bids, keyed by auction and pane — the tumbling window of
//     Q5WindowSlide, of which each hop window is a run of five — are
//     merged into partial counts per processing round of each input task
//     (CombineRounds: half of the bids go to one hot auction), then keyed
//     by auction (a repartition) and summed per hop window. A partial
//     count's timestamp lies in its pane, so it falls in the same five hop
//     windows as its bids. The windowed sum keeps one partial per auction
//     and pane (the library's pane layout for hopping windows) and adds up
//     a window's five panes when it closes; a final count carries its
//     window's last instant (end - 1 ms) as its timestamp;
//  2. those counts, keyed by their window's start, are merged per round
//     into the task's most-bid ones (a task emits all its counts of a
//     window in the round that closes it), which are keyed by the window's
//     start (a repartition of a few records per window) and merged into
//     the most-bid ones of the window. All the counts of one hop window
//     carry the same timestamp, end - 1 ms, which lies in exactly one
//     tumbling window of Q5WindowSlide, [end - slide, end). That window
//     closes when the watermark passes the hop window's end. The watermark
//     crosses each repartition topic behind the records (a round's merged
//     records leave before its watermark marker), so by then every count
//     of the window has arrived. Its records and aggregates use a binary
//     codec (codec.go), not the inferred JSON.
//
// The merges per round depend on how the records fall into rounds, the
// results do not: a sum of partial counts is the count, the most-bid ones
// of the most-bid ones of parts are the most-bid ones of the whole.
func q5(b *stream.Builder, in, out string, _ Options) error {
	slide := Q5WindowSlide * time.Millisecond
	final := func(name string) stream.WindowedStore {
		return stream.WindowedStore{Name: name, Late: stream.DropLate(), Emit: stream.EmitFinal()}
	}
	// One record per auction, pane and processing round of each input
	// task (CombineRounds), where there was one per bid: half of the bids
	// go to one hot auction.
	bids := stream.MapValues(stream.KeyBy(eventNumbers(b, in, BidEvent), func(r stream.Record[[]byte, Event]) (auctionPane, error) {
		return auctionPane{auction: r.Value.Bid.Auction, pane: floorMs(r.Timestamp.UnixMilli(), Q5WindowSlide)}, nil
	}), func(stream.Record[auctionPane, Event]) (int64, error) { return 1, nil })
	partial := stream.CombineRounds(bids, func(a, b int64) (int64, error) { return a + b, nil })
	byAuction := stream.GroupBy(partial, func(r stream.Record[auctionPane, int64]) (int64, error) { return r.Key.auction, nil },
		stream.Codecs(stream.Int64(), stream.Int64()))
	counts := stream.WindowedReduce(byAuction, stream.Hopping(Q5WindowSize*time.Millisecond, slide),
		final("q5-bids-per-window"), func(sum, n int64) (int64, error) { return sum + n, nil })

	// A task emits all its counts of a hop window in the round that closes
	// the window: CombineRounds keeps the task's most-bid ones of each
	// window and round, so the last stage takes a few records per window
	// (one per task, or per round that closed some of its counts) instead of
	// one per auction.
	one := stream.MapValues(counts.ToStream(), func(r stream.Record[stream.Windowed[int64], int64]) ([]Q5Result, error) {
		return []Q5Result{{WindowStart: r.Key.Start.UnixMilli(), WindowEnd: r.Key.End.UnixMilli(), Auction: r.Key.Key, Num: r.Value}}, nil
	})
	byStart := stream.KeyBy(one, func(r stream.Record[stream.Windowed[int64], []Q5Result]) (int64, error) {
		return r.Key.Start.UnixMilli(), nil
	})
	local := stream.CombineRounds(byStart, func(a, b []Q5Result) ([]Q5Result, error) { return mostBids(a, b), nil })
	hottest := stream.WindowedReduce(stream.GroupByKey(local, stream.Codecs(stream.Int64(), sliceOf(q5Codec))),
		stream.Tumbling(slide), final("q5-hottest"), func(a, b []Q5Result) ([]Q5Result, error) { return mostBids(a, b), nil })

	results := stream.FlatMapValues(hottest.ToStream(), func(r stream.Record[stream.Windowed[int64], []Q5Result]) ([]Q5Result, error) {
		return r.Value, nil
	})
	stream.KeyBy(results, func(r stream.Record[stream.Windowed[int64], Q5Result]) (int64, error) { return r.Key.Key, nil }).
		To(out, stream.Int64(), stream.JSON[Q5Result]())
	return nil
}

// mostBids merges a and b, each the counts with the most bids of a part of
// a window's counts (all equal): the one with more, or both if as many.
// Neither is modified (an aggregate is a value).
func mostBids(a, b []Q5Result) []Q5Result {
	switch {
	case len(a) == 0 || (len(b) > 0 && b[0].Num > a[0].Num):
		return b
	case len(b) == 0 || a[0].Num > b[0].Num:
		return a
	}
	return append(slices.Clip(a), b...)
}

// auctionPane is a bid's auction and the start of its pane (ms).
type auctionPane struct{ auction, pane int64 }

// floorMs is the largest multiple of step at or below ms.
func floorMs(ms, step int64) int64 {
	r := ms % step
	if r < 0 {
		r += step
	}
	return ms - r
}

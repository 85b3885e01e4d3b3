package nexmark

import (
	"time"

	"github.com/weirhq/weir/stream"
)

// q11 is user sessions: each bidder's bids counted per SESSION window of
// gap Q11Gap, one Q11Result per session (emitted once, when the watermark
// closes it), keyed by the bidder (Int64).
//
// Nexmark's session is [first bid, last bid + gap): a bid exactly gap
// after the last one starts a new session. The library's session windows
// are Kafka Streams' (a record at most gap after the last joins it), so the
// query asks for one millisecond less; a session window's End is its last
// record's time, and the result's endtime adds the gap back.
func q11(b *stream.Builder, in, out string, _ Options) error {
	bidders := stream.MapValues(events(b, in, BidEvent), func(r stream.Record[[]byte, Event]) (int64, error) {
		return r.Value.Bid.Bidder, nil
	})
	byBidder := stream.GroupBy(bidders, func(r stream.Record[[]byte, int64]) (int64, error) { return r.Value, nil })
	sessions := stream.WindowedCount(byBidder, stream.Session(Q11Gap*time.Millisecond-time.Millisecond),
		stream.WindowedStore{Name: "q11-sessions", Late: stream.DropLate(), Emit: stream.EmitFinal()})

	results := stream.MapValues(sessions.ToStream(), func(r stream.Record[stream.Windowed[int64], int64]) (Q11Result, error) {
		return Q11Result{Bidder: r.Key.Key, BidCount: r.Value, StartTime: r.Key.Start.UnixMilli(), EndTime: r.Key.End.UnixMilli() + Q11Gap}, nil
	})
	stream.KeyBy(results, func(r stream.Record[stream.Windowed[int64], Q11Result]) (int64, error) { return r.Key.Key, nil }).
		To(out, stream.Int64(), stream.JSON[Q11Result]())
	return nil
}

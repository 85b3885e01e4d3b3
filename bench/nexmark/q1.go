package nexmark

import "github.com/weirhq/weir/stream"

// q1 is currency conversion: every bid with its price in euros (Q1Result,
// price * Q1Rate), as Flink's
//
//	SELECT auction, bidder, 0.908 * price, dateTime, extra FROM bid
//
// A stateless query: a map of the bids (the source skips the other kinds
// without building them), one record out per bid, in the input's order
// within each partition.
func q1(b *stream.Builder, in, out string, _ Options) error {
	bids := events(b, in, BidEvent)
	stream.MapValues(bids, func(r stream.Record[[]byte, Event]) (Q1Result, error) {
		bid := r.Value.Bid
		return Q1Result{Auction: bid.Auction, Bidder: bid.Bidder, Price: float64(bid.Price) * Q1Rate,
			DateTime: bid.DateTime, Extra: bid.Extra}, nil
	}).To(out, stream.Bytes(), stream.JSON[Q1Result]())
	return nil
}

package nexmark

import "github.com/weirhq/weir/stream"

// q2 is selection: the auction and price of every bid on an auction whose
// ID is a multiple of 123, as Flink's
//
//	SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
func q2(b *stream.Builder, in, out string, _ Options) error {
	selected := events(b, in, BidEvent).Filter(func(r stream.Record[[]byte, Event]) (bool, error) {
		return r.Value.Bid.Auction%123 == 0, nil
	})
	stream.MapValues(selected, func(r stream.Record[[]byte, Event]) (Q2Result, error) {
		return Q2Result{Auction: r.Value.Bid.Auction, Price: r.Value.Bid.Price}, nil
	}).To(out, stream.Bytes(), stream.JSON[Q2Result]())
	return nil
}

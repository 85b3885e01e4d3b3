package nexmark

import (
	"cmp"
	"slices"
	"time"

	"github.com/weirhq/weir/stream"
)

// q6 is the average selling price by seller: for each seller, the average
// winning price of their last Q6Auctions closed auctions (see
// closeAuctions), as Flink's
//
//	SELECT seller, AVG(final) OVER (PARTITION BY seller ORDER BY dateTime
//	    ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
//	FROM (winning bids joined to their auctions)
//
// The result is a table, one row per seller (key: the seller, Int64 codec),
// updated as the seller's auctions close; its latest record per key is the
// current average (Q6Result). "Last" is by close time (expires, then auction
// ID), whatever order the closes arrive in. A seller's row is kept for
// q6SellerTTL of event time after their last closed auction.
func q6(b *stream.Builder, in, out string, _ Options) error {
	closed := closeAuctions(b, in, "q6-auctions")
	bySeller := stream.GroupBy(closed, func(r stream.Record[int64, closedAuction]) (int64, error) {
		return r.Value.Seller, nil
	}, stream.Codecs(stream.Int64(), stream.JSON[closedAuction]()))
	latest := stream.Aggregate(bySeller, stream.StoreConfig{Name: "q6-sellers", TTL: q6SellerTTL},
		func() []closedAuction { return nil },
		func(r stream.Record[int64, closedAuction], last []closedAuction) ([]closedAuction, error) {
			last = append(last, r.Value)
			slices.SortFunc(last, func(x, y closedAuction) int {
				return cmp.Or(cmp.Compare(x.Expires, y.Expires), cmp.Compare(x.ID, y.ID))
			})
			return last[max(len(last)-Q6Auctions, 0):], nil
		})
	stream.MapValues(latest.ToStream(), func(r stream.Record[int64, []closedAuction]) (Q6Result, error) {
		var sum int64
		for _, a := range r.Value {
			sum += a.Price
		}
		return Q6Result{Seller: r.Key, Avg: float64(sum) / float64(len(r.Value))}, nil
	}).To(out, stream.Int64(), stream.JSON[Q6Result]())
	return nil
}

// q6SellerTTL bounds q6's state: a seller's last auctions are forgotten
// after this much event time without one of them closing. The Nexmark
// generator picks sellers among the 1,000 newest persons (and a hot one),
// who joined within the last 5 seconds of event time at its default rate.
const q6SellerTTL = time.Hour

package nexmark

import "github.com/weirhq/weir/stream"

// q4 is the average closing price per category: each auction's winning
// price once it closes (see closeAuctions), averaged per category, as
// Flink's
//
//	SELECT Q.category, AVG(Q.final)
//	FROM (SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	      GROUP BY A.id, A.category) Q
//	GROUP BY Q.category
//
// The result is a table, one row per category (key: the category, Int64
// codec), updated as auctions close: the output topic carries its updates,
// and its latest record per key is the current average (Q4Result).
func q4(b *stream.Builder, in, out string, _ Options) error {
	closed := closeAuctions(b, in, "q4-auctions")
	byCategory := stream.GroupBy(closed, func(r stream.Record[int64, closedAuction]) (int64, error) {
		return r.Value.Category, nil
	}, stream.Codecs(stream.Int64(), stream.JSON[closedAuction]()))
	type sum struct{ Sum, Count int64 }
	sums := stream.Aggregate(byCategory, stream.StoreConfig{Name: "q4-categories",
		NoExpiry: "one key per auction category (Nexmark has 5)"},
		func() sum { return sum{} },
		func(r stream.Record[int64, closedAuction], s sum) (sum, error) {
			return sum{Sum: s.Sum + r.Value.Price, Count: s.Count + 1}, nil
		})
	stream.MapValues(sums.ToStream(), func(r stream.Record[int64, sum]) (Q4Result, error) {
		return Q4Result{Category: r.Key, Avg: float64(r.Value.Sum) / float64(r.Value.Count)}, nil
	}).To(out, stream.Int64(), stream.JSON[Q4Result]())
	return nil
}

package nexmark

import (
	"time"

	"github.com/weirhq/weir/stream"
)

// q3 is local item suggestion: who sells items of category 10 in Oregon,
// Idaho or California, as Flink's incremental join
//
//	SELECT P.name, P.city, P.state, A.id FROM auction A, person P
//	WHERE A.seller = P.id AND P.state IN ('OR', 'ID', 'CA') AND A.category = 10
//
// Persons (keyed by their ID) and auctions (keyed by their seller) meet in
// one processor, whichever comes first: a person is stored and answers the
// auctions that come after (if they live in one of the states); an auction
// whose seller has not come yet waits for them. One result (Q3Result, key: the auction
// ID, Int64 codec) per matching auction, when both sides are in.
//
// State is kept for q3TTL of event time: Nexmark's sellers are among the
// 1,000 newest persons, who joined within the last 5 seconds of event time
// at the generator's default rate.
func q3(b *stream.Builder, in, out string, _ Options) error {
	ev := events(b, in, PersonEvent, AuctionEvent)
	persons := stream.KeyBy(ev.Filter(isPerson), func(r stream.Record[[]byte, Event]) (int64, error) {
		return r.Value.Person.ID, nil
	})
	auctions := stream.KeyBy(ev.Filter(func(r stream.Record[[]byte, Event]) (bool, error) {
		return r.Value.Type == AuctionEvent && r.Value.Auction.Category == 10, nil
	}), func(r stream.Record[[]byte, Event]) (int64, error) { return r.Value.Auction.Seller, nil })

	sellers := stream.KeyValueStore[int64, Q3Result](stream.StoreConfig{Name: "q3-sellers", TTL: q3TTL})
	waiting := stream.KeyValueStore[int64, []int64](stream.StoreConfig{Name: "q3-waiting", TTL: q3TTL})
	type ctx = stream.ProcessContext[int64, int64, Q3Result]
	stream.Process(persons.Merge(auctions), stream.ProcessConfig{Name: "q3-join",
		Stores: []stream.ProcessStore{sellers, waiting}},
		stream.Processor[int64, Event, int64, Q3Result]{
			OnRecord: func(c *ctx, r stream.Record[int64, Event]) error {
				if p := r.Value.Person; p != nil {
					ids, _, err := waiting.Get(c, p.ID)
					if err != nil {
						return err
					}
					if len(ids) > 0 {
						if err := waiting.Delete(c, p.ID); err != nil {
							return err
						}
					}
					seller := Q3Result{Name: p.Name, City: p.City, State: p.State}
					if err := sellers.Put(c, p.ID, seller); err != nil {
						return err
					}
					if !local(seller.State) {
						return nil
					}
					for _, id := range ids {
						seller.ID = id
						if err := c.Forward(stream.Record[int64, Q3Result]{Key: id, Value: seller}); err != nil {
							return err
						}
					}
					return nil
				}
				a := r.Value.Auction
				seller, found, err := sellers.Get(c, a.Seller)
				if err != nil {
					return err
				}
				if found && !local(seller.State) {
					return nil
				}
				if found {
					seller.ID = a.ID
					return c.Forward(stream.Record[int64, Q3Result]{Key: a.ID, Value: seller})
				}
				ids, _, err := waiting.Get(c, a.Seller)
				if err != nil {
					return err
				}
				return waiting.Put(c, a.Seller, append(ids, a.ID))
			},
		}, stream.Codecs(stream.Int64(), EventCodec())).To(out, stream.Int64(), stream.JSON[Q3Result]())
	return nil
}

// q3TTL bounds q3's state (see q3).
const q3TTL = time.Hour

// local reports whether a seller's state is one q3 looks for.
func local(state string) bool { return state == "OR" || state == "ID" || state == "CA" }

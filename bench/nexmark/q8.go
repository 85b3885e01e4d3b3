package nexmark

import (
	"time"

	"github.com/weirhq/weir/stream"
)

// q8 is monitor new users: for each TUMBLE window of Q8Window, every
// person who joined in it and opened an auction in it (Q8Result), keyed by
// the person's ID (Int64).
//
// A windowed co-group of the two kinds of event: persons by their ID and
// auctions by their seller, both into one table of activity per person and
// window, whose final value (emitted once, when the watermark closes the
// window) says whether both happened.
func q8(b *stream.Builder, in, out string, _ Options) error {
	newcomers := events(b, in, PersonEvent, AuctionEvent)
	byPerson := stream.KeyBy(newcomers, func(r stream.Record[[]byte, Event]) (int64, error) {
		if p := r.Value.Person; p != nil {
			return p.ID, nil
		}
		return r.Value.Auction.Seller, nil
	})
	activity := stream.MapValues(byPerson, func(r stream.Record[int64, Event]) (q8Activity, error) {
		if p := r.Value.Person; p != nil {
			return q8Activity{Name: p.Name, Joined: true}, nil
		}
		return q8Activity{Opened: true}, nil
	})
	perWindow := stream.WindowedReduce(stream.GroupByKey(activity), stream.Tumbling(Q8Window*time.Millisecond),
		stream.WindowedStore{Name: "q8-activity", Late: stream.DropLate(), Emit: stream.EmitFinal()},
		func(a, v q8Activity) (q8Activity, error) {
			if v.Joined {
				a.Name, a.Joined = v.Name, true
			}
			a.Opened = a.Opened || v.Opened
			return a, nil
		})

	newUsers := perWindow.ToStream().Filter(func(r stream.Record[stream.Windowed[int64], q8Activity]) (bool, error) {
		return r.Value.Joined && r.Value.Opened, nil
	})
	results := stream.MapValues(newUsers, func(r stream.Record[stream.Windowed[int64], q8Activity]) (Q8Result, error) {
		return Q8Result{WindowStart: r.Key.Start.UnixMilli(), WindowEnd: r.Key.End.UnixMilli(), ID: r.Key.Key, Name: r.Value.Name}, nil
	})
	stream.KeyBy(results, func(r stream.Record[stream.Windowed[int64], Q8Result]) (int64, error) { return r.Key.Key, nil }).
		To(out, stream.Int64(), stream.JSON[Q8Result]())
	return nil
}

// q8Activity is what one window saw of one person: whether they joined
// (then with their name) and whether they opened an auction.
type q8Activity struct {
	Name   string `json:"name,omitempty"`
	Joined bool   `json:"joined,omitempty"`
	Opened bool   `json:"opened,omitempty"`
}

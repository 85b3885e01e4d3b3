package surge

import (
	"io"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzBoardApply: any bytes on the output topic give an error or a zone (a
// tombstone: none), never a panic, and a bad record changes nothing.
func FuzzBoardApply(f *testing.F) {
	f.Add([]byte("downtown"), []byte(`{"zone":"downtown","requests":3,"demand":1.5,"drivers":2,"surge":1}`))
	f.Add([]byte("k"), []byte(`{"requests":"x"}`))
	f.Add([]byte(nil), []byte(nil))
	f.Add([]byte("z"), []byte(`{}`))
	f.Add([]byte("z"), []byte(`{"surge":-1e308}`))
	f.Add([]byte("z"), []byte(`{"surge":1e308}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		b := NewBoard()
		err := b.Apply(&kgo.Record{Topic: SurgeTopic, Key: key, Value: value})
		if _, err := b.Render(io.Discard); err != nil {
			t.Fatal(err)
		}
		n := len(b.Snapshot())
		if err != nil && (n != 0 || b.Updates() != 0) {
			t.Fatalf("failed apply changed the board: %d zones", n)
		}
		if err == nil && value == nil && (n != 0 || b.Updates() != 1) {
			t.Fatalf("tombstone: %d zones, %d updates", n, b.Updates())
		}
		if err == nil && value != nil && (n != 1 || b.Updates() != 1) {
			t.Fatalf("apply: %d zones, %d updates", n, b.Updates())
		}
	})
}

// FuzzDemandOrderIndependent: the demand of a zone does not depend on the
// order its requests arrive in (late events are added already decayed), up
// to float rounding.
func FuzzDemandOrderIndependent(f *testing.F) {
	f.Add([]byte{0, 10, 3, 200, 7})
	f.Add([]byte{255, 0, 255, 0})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, offsets []byte) {
		if len(offsets) == 0 || len(offsets) > 200 {
			return
		}
		c := Config{}.withDefaults()
		fold := func(order []byte) ZoneStats {
			var z ZoneStats
			for _, o := range order {
				z = c.apply(z, "z", zoneEvent{Request: true}, t0.Add(time.Duration(o)*time.Second))
			}
			return z
		}
		rev := make([]byte, len(offsets))
		for i, o := range offsets {
			rev[len(offsets)-1-i] = o
		}
		a, b := fold(offsets), fold(rev)
		if !a.DemandAt.Equal(b.DemandAt) || a.Requests != b.Requests || a.Requests != int64(len(offsets)) {
			t.Fatalf("in order %+v, reversed %+v", a, b)
		}
		if math.Abs(a.Demand-b.Demand) > 1e-9*math.Max(1, a.Demand) {
			t.Fatalf("demand %v in order, %v reversed", a.Demand, b.Demand)
		}
	})
}

package timekey

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/weirhq/weir/stream/internal/state"
)

// TestScansInStateStore writes window, index and timer keys into a real
// task store (stream/internal/state over Pebble) and reads them back with
// the scan bounds: each question is one ordered scan returning exactly the
// model's answer, in order.
func TestScansInStateStore(t *testing.T) {
	db, err := state.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const store = "counts-per-zone"
	ws := []win{
		{"a", 0, 10}, {"a", 10, 20}, {"a", 20, 30},
		{"a\x00", 5, 15}, {"ab", 0, 10}, {"", -10, 0}, {"b", 100, 200},
	}
	timers := []Timer{
		{EventTime, 15, []byte("a"), nil}, {EventTime, 10, []byte("b"), []byte("flush")},
		{EventTime, 10, []byte("a"), nil}, {ProcessingTime, 1, []byte("a"), nil}, {EventTime, 99, []byte("a"), nil},
	}
	txn := db.Begin()
	for _, w := range ws {
		if _, err := txn.Put(store, WindowKey(nil, []byte(w.key), w.start, w.end), []byte("v"), w.end); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Put(store, IndexKey(nil, []byte(w.key), w.start, w.end), nil, w.end); err != nil {
			t.Fatal(err)
		}
	}
	for _, tm := range timers {
		if _, err := txn.Put(store, TimerKey(nil, tm), nil, tm.Fire); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Apply(); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}

	scan := func(from, to []byte, parse func([]byte) (win, error)) []win {
		t.Helper()
		var out []win
		err := db.Scan(store, from, to, func(k, _ []byte, _ int64) error {
			w, err := parse(k)
			out = append(out, w)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	parseW := func(k []byte) (win, error) { key, s, e, err := ParseWindowKey(k); return win{string(key), s, e}, err }
	parseX := func(k []byte) (win, error) { key, s, e, err := ParseIndexKey(k); return win{string(key), s, e}, err }

	from, to := KeyWindows([]byte("a"), math.MinInt64)
	if got, want := scan(from, to, parseW), []win{{"a", 0, 10}, {"a", 10, 20}, {"a", 20, 30}}; !slices.Equal(got, want) {
		t.Errorf("key a's windows: %v, want %v", got, want)
	}
	from, to = KeyWindows([]byte("a"), 20)
	if got, want := scan(from, to, parseW), []win{{"a", 10, 20}, {"a", 20, 30}}; !slices.Equal(got, want) {
		t.Errorf("key a's windows ending at 20 or later: %v, want %v", got, want)
	}
	from, to = KeyWindows([]byte(""), math.MinInt64)
	if got, want := scan(from, to, parseW), []win{{"", -10, 0}}; !slices.Equal(got, want) {
		t.Errorf("empty key's windows: %v, want %v", got, want)
	}
	from, to = EndingBy(10)
	if got, want := scan(from, to, parseX), []win{{"", -10, 0}, {"a", 0, 10}, {"ab", 0, 10}}; !slices.Equal(got, want) {
		t.Errorf("windows ending by 10: %v, want %v", got, want)
	}

	var fired []Timer
	from, to = FiringBy(EventTime, 15)
	if err := db.Scan(store, from, to, func(k, _ []byte, _ int64) error {
		tm, err := ParseTimerKey(k)
		fired = append(fired, tm)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tm := range fired {
		got = append(got, tm.Domain.String()+"/"+string(tm.Key)+"/"+string(tm.Name))
	}
	if want := []string{"event-time/a/", "event-time/b/flush", "event-time/a/"}; !slices.Equal(got, want) || fired[0].Fire != 10 || fired[2].Fire != 15 {
		t.Errorf("event-time timers firing by 15: %v %v, want %v at 10, 10, 15", got, fired, want)
	}

	// A session lookup stops early: scan from End >= t-gap, stop at Start > t+gap.
	errStop := errors.New("stop")
	var seen []win
	from, to = KeyWindows([]byte("a"), 12)
	err = db.Scan(store, from, to, func(k, _ []byte, _ int64) error {
		w, _ := parseW(k)
		if w.start > 18 {
			return errStop
		}
		seen = append(seen, w)
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("scan: %v", err)
	}
	if want := []win{{"a", 10, 20}}; !slices.Equal(seen, want) {
		t.Errorf("session candidates: %v, want %v", seen, want)
	}
}

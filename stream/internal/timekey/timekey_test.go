package timekey

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func TestKeyEscaping(t *testing.T) {
	tests := []struct {
		key  string
		want string // hex
	}{
		{"", "0001"},
		{"a", "610001"},
		{"a\x00", "6100ff0001"},
		{"\x00\x00", "00ff00ff0001"},
		{"\x00\x01", "00ff010001"},
		{"\xff", "ff0001"},
	}
	for _, tt := range tests {
		got := AppendKey(nil, []byte(tt.key))
		if hex.EncodeToString(got) != tt.want {
			t.Errorf("AppendKey(%q) = %x, want %s", tt.key, got, tt.want)
		}
		if len(got) != escapedLen([]byte(tt.key)) {
			t.Errorf("escapedLen(%q) = %d, want %d", tt.key, escapedLen([]byte(tt.key)), len(got))
		}
		k, rest, err := ReadKey(append(got, 'z'))
		if err != nil || string(k) != tt.key || string(rest) != "z" {
			t.Errorf("ReadKey(%x z) = %q, %q, %v", got, k, rest, err)
		}
	}
	for _, bad := range []string{"", "61", "6100", "610002", "00"} {
		b, _ := hex.DecodeString(bad)
		if _, _, err := ReadKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ReadKey(%s) err = %v, want ErrMalformed", bad, err)
		}
	}
}

// The byte layout, written out: a change here is a format change.
func TestLayouts(t *testing.T) {
	w := WindowKey(nil, []byte("k"), 1000, 2000)
	if got, want := hex.EncodeToString(w), "77"+"6b0001"+"80000000000007d0"+"80000000000003e8"; got != want {
		t.Errorf("WindowKey = %s, want %s", got, want)
	}
	x := IndexKey(nil, []byte("k"), -1, 0)
	if got, want := hex.EncodeToString(x), "63"+"8000000000000000"+"6b0001"+"7fffffffffffffff"; got != want {
		t.Errorf("IndexKey = %s, want %s", got, want)
	}
	tm := TimerKey(nil, Timer{Domain: ProcessingTime, Fire: 5, Key: []byte{0}, Name: []byte("n")})
	if got, want := hex.EncodeToString(tm), "70"+"8000000000000005"+"00ff0001"+"6e"; got != want {
		t.Errorf("TimerKey = %s, want %s", got, want)
	}
}

type win struct {
	key        string
	start, end int64
}

func randKey(r *rand.Rand) string {
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0xff}
	b := make([]byte, r.IntN(4))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func randTime(r *rand.Rand) int64 {
	switch r.IntN(8) {
	case 0:
		return math.MinInt64 + r.Int64N(3)
	case 1:
		return math.MaxInt64 - r.Int64N(3)
	}
	return r.Int64N(41) - 20
}

func randWindows(r *rand.Rand, n int) []win {
	ws := make([]win, n)
	for i := range ws {
		a, b := randTime(r), randTime(r)
		if b < a {
			a, b = b, a
		}
		ws[i] = win{randKey(r), a, b}
	}
	return ws
}

// inRange returns the keys of the sorted encoded set within [from, to) (to
// nil: unbounded).
func inRange(sorted [][]byte, from, to []byte) [][]byte {
	i := sort.Search(len(sorted), func(i int) bool { return bytes.Compare(sorted[i], from) >= 0 })
	j := len(sorted)
	if to != nil {
		j = sort.Search(len(sorted), func(i int) bool { return bytes.Compare(sorted[i], to) >= 0 })
	}
	if j < i {
		return nil
	}
	return sorted[i:j]
}

// TestWindowOrderAndScans compares the byte order and the scan bounds with
// a model: sort and filter the decoded tuples.
func TestWindowOrderAndScans(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		ws := randWindows(r, 1+r.IntN(40))
		var wkeys, xkeys [][]byte
		for _, w := range ws {
			wkeys = append(wkeys, WindowKey(nil, []byte(w.key), w.start, w.end))
			xkeys = append(xkeys, IndexKey(nil, []byte(w.key), w.start, w.end))
		}
		slices.SortFunc(wkeys, bytes.Compare)
		wkeys = slices.CompactFunc(wkeys, bytes.Equal)
		slices.SortFunc(xkeys, bytes.Compare)
		xkeys = slices.CompactFunc(xkeys, bytes.Equal)

		model := slices.Clone(ws)
		slices.SortFunc(model, func(a, b win) int {
			return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start))
		})
		model = slices.Compact(model)
		for i, k := range wkeys {
			key, s, e, err := ParseWindowKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := (win{string(key), s, e}); got != model[i] {
				t.Fatalf("window key %d in byte order = %+v, model %+v", i, got, model[i])
			}
		}
		slices.SortFunc(model, func(a, b win) int {
			return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.key, b.key), cmp.Compare(a.start, b.start))
		})
		for i, k := range xkeys {
			key, s, e, err := ParseIndexKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := (win{string(key), s, e}); got != model[i] {
				t.Fatalf("index key %d in byte order = %+v, model %+v", i, got, model[i])
			}
		}

		// One key's windows from an end on: one range.
		q, minEnd := randKey(r), randTime(r)
		from, to := KeyWindows([]byte(q), minEnd)
		var want []win
		for _, w := range model {
			if w.key == q && w.end >= minEnd {
				want = append(want, w)
			}
		}
		var got []win
		for _, k := range inRange(wkeys, from, to) {
			key, s, e, _ := ParseWindowKey(k)
			got = append(got, win{string(key), s, e})
		}
		slices.SortFunc(want, func(a, b win) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start)) })
		if !slices.Equal(got, want) {
			t.Fatalf("KeyWindows(%q, %d) scan = %v, want %v", q, minEnd, got, want)
		}

		// The windows ending by a time: one range of the index.
		maxEnd := randTime(r)
		from, to = EndingBy(maxEnd)
		want = want[:0]
		for _, w := range model {
			if w.end <= maxEnd {
				want = append(want, w)
			}
		}
		got = got[:0]
		for _, k := range inRange(xkeys, from, to) {
			key, s, e, _ := ParseIndexKey(k)
			got = append(got, win{string(key), s, e})
		}
		if len(got) != len(want) || (len(got) > 0 && !slices.Equal(got, want)) {
			t.Fatalf("EndingBy(%d) scan = %v, want %v", maxEnd, got, want)
		}
	}
}

type tmr struct {
	d         Domain
	fire      int64
	key, name string
}

func TestTimerOrderAndScans(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		var model []tmr
		var keys [][]byte
		for i := 0; i < 1+r.IntN(40); i++ {
			tm := tmr{[]Domain{EventTime, ProcessingTime}[r.IntN(2)], randTime(r), randKey(r), randKey(r)}
			model = append(model, tm)
			keys = append(keys, TimerKey(nil, Timer{tm.d, tm.fire, []byte(tm.key), []byte(tm.name)}))
		}
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		slices.SortFunc(model, func(a, b tmr) int {
			return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.fire, b.fire), cmp.Compare(a.key, b.key), cmp.Compare(a.name, b.name))
		})
		model = slices.Compact(model)
		if len(keys) != len(model) {
			t.Fatalf("%d distinct keys, %d distinct timers", len(keys), len(model))
		}
		for i, k := range keys {
			tm, err := ParseTimerKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := (tmr{tm.Domain, tm.Fire, string(tm.Key), string(tm.Name)}); got != model[i] {
				t.Fatalf("timer %d in byte order = %+v, model %+v", i, got, model[i])
			}
		}
		d, w := []Domain{EventTime, ProcessingTime}[r.IntN(2)], randTime(r)
		from, to := FiringBy(d, w)
		var want, got []tmr
		for _, m := range model {
			if m.d == d && m.fire <= w {
				want = append(want, m)
			}
		}
		for _, k := range inRange(keys, from, to) {
			tm, _ := ParseTimerKey(k)
			got = append(got, tmr{tm.Domain, tm.Fire, string(tm.Key), string(tm.Name)})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("FiringBy(%v, %d) = %v, want %v", d, w, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := WindowKey(nil, []byte("k"), 1, 2)
	for _, b := range [][]byte{nil, {'x'}, good[:len(good)-1], append(slices.Clone(good), 0), WindowKey(nil, []byte("k"), 2, 1)} {
		if _, _, _, err := ParseWindowKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseWindowKey(%x) err = %v", b, err)
		}
	}
	gx := IndexKey(nil, []byte("k"), 1, 2)
	for _, b := range [][]byte{nil, {TagIndex}, gx[:len(gx)-1], append(slices.Clone(gx), 0), IndexKey(nil, []byte("k"), 2, 1)} {
		if _, _, _, err := ParseIndexKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseIndexKey(%x) err = %v", b, err)
		}
	}
	for _, b := range [][]byte{nil, {'e'}, {'q', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {'e', 0, 0, 0, 0, 0, 0, 0, 0, 'a'}} {
		if _, err := ParseTimerKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseTimerKey(%x) err = %v", b, err)
		}
	}
}

func FuzzParseWindowKey(f *testing.F) {
	f.Add(WindowKey(nil, []byte("k\x00"), -5, 7))
	f.Add([]byte{TagWindow, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, s, e, err := ParseWindowKey(b)
		if err != nil {
			return
		}
		if again := WindowKey(nil, key, s, e); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

func FuzzParseIndexKey(f *testing.F) {
	f.Add(IndexKey(nil, []byte("k\x00"), -5, 7))
	f.Add([]byte{TagIndex})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, s, e, err := ParseIndexKey(b)
		if err != nil {
			return
		}
		if again := IndexKey(nil, key, s, e); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

func FuzzParseTimerKey(f *testing.F) {
	f.Add(TimerKey(nil, Timer{EventTime, 9, []byte("\x00k"), []byte("name")}))
	f.Add([]byte{'p'})
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := ParseTimerKey(b)
		if err != nil {
			return
		}
		if again := TimerKey(nil, tm); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

package stream

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
)

// decodeRow never panics, and accepts exactly what encodeRow writes: a row
// it decodes encodes back to the same bytes.
func FuzzDecodeRow(f *testing.F) {
	f.Add(encodeRow(5200, nil))
	f.Add(encodeRow(5200, []rowPane{{start: 4200, agg: []byte{0, 0, 0, 0, 0, 0, 0, 1}}, {start: 4400, agg: []byte("x")}}))
	f.Add(encodeRow(-1, []rowPane{{start: -1 << 63, agg: nil}, {start: 1<<63 - 1, agg: make([]byte, 200)}}))
	f.Add([]byte{rowFormat, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0x80, 0x00})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, v []byte) {
		next, panes, err := decodeRow(nil, v)
		if err != nil {
			return
		}
		if got := encodeRow(next, panes); !bytes.Equal(got, v) {
			t.Fatalf("decoded %x as next %d, %d panes, which encode as %x", v, next, len(panes), got)
		}
	})
}

func TestDecodeRowRejects(t *testing.T) {
	good := encodeRow(5200, []rowPane{{start: 4200, agg: []byte{1}}, {start: 4400, agg: []byte{2, 3}}})
	for name, v := range map[string][]byte{
		"empty":          nil,
		"format":         append([]byte{2}, good[1:]...),
		"short header":   good[:rowHeader-1],
		"short pane":     good[:rowHeader+5],
		"short agg":      good[:len(good)-1],
		"out of order":   encodeRow(5200, []rowPane{{start: 4400, agg: []byte{1}}, {start: 4200, agg: []byte{2}}}),
		"same start":     encodeRow(5200, []rowPane{{start: 4400, agg: []byte{1}}, {start: 4400, agg: []byte{2}}}),
		"long varint":    append(append(good[:rowHeader+8:rowHeader+8], 0x81, 0x00), 1),
		"varint overrun": append(good[:rowHeader+8:rowHeader+8], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		if _, _, err := decodeRow(nil, v); err == nil {
			t.Errorf("%s: %x decoded", name, v)
		}
	}
	if next, panes, err := decodeRow(nil, good); err != nil || next != 5200 || len(panes) != 2 || panes[1].start != 4400 ||
		!bytes.Equal(panes[1].agg, []byte{2, 3}) {
		t.Fatalf("good row: %d %v %v", next, panes, err)
	}
}

// A restore derives a row's close index entry from the next the row holds,
// not from its changelog record's timestamp: a record's timestamp is the
// producer's (a changelog copied or rewritten by another tool, a compacted
// topic whose records kept older timestamps) and the entry must still sit at
// the row's next window, the one a close scan looks for.
func TestRowChangelogRestoreIndexesAtRowNext(t *testing.T) {
	const store, size = "p", 1000
	db, err := state.Open(t.TempDir(), nil, state.Derived(store, rowCloseIndex(size)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := &storeSpec{name: store}
	agg := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	rows := map[string]struct {
		next int64
		ts   time.Time
	}{
		"a": {next: 5200, ts: time.UnixMilli(9_000)}, // timestamp past the row's next
		"b": {next: 7400, ts: time.UnixMilli(100)},   // timestamp far before it
		"c": {next: 3000, ts: time.UnixMilli(2_999)}, // next - 1, as weir writes it
	}
	txn := db.Begin()
	for k, r := range rows {
		rec := &kgo.Record{Key: rowKey(nil, []byte(k)),
			Value: encodeRow(r.next, []rowPane{{start: r.next - size, agg: agg}}), Timestamp: r.ts}
		if err := applyRowChangelog(txn, spec, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.CommitThrough(); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	var index []string
	if err := db.Scan(store, []byte{timekey.TagIndex}, []byte{timekey.TagIndex + 1}, func(k, _ []byte, _ int64) error {
		index = append(index, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k, r := range rows {
		want = append(want, string(timekey.IndexKey(nil, []byte(k), r.next-size, r.next)))
	}
	slices.Sort(want)
	if !slices.Equal(index, want) {
		t.Fatalf("close index after the restore:\n got %q\nwant %q", index, want)
	}
}

package recbatch

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

type got struct {
	off        int64
	key, value []byte
	pid        int64
	epoch      int16
	attrs      int16
}

func collect(t *testing.T, data []byte) ([]got, int64) {
	t.Helper()
	var out []got
	next, consumed, err := Walk(data, func(b *Batch) error {
		return b.Records(func(off int64, k, v []byte) error {
			out = append(out, got{off, k, v, b.ProducerID, b.ProducerEpoch, b.Attributes})
			return nil
		})
	})
	if err != nil || consumed != len(data) {
		t.Fatalf("walk: consumed %d of %d, err %v", consumed, len(data), err)
	}
	return out, next
}

// TestLogAcceptsEveryBatch appends every kind of batch the coordinators
// write to a real log (which validates framing, CRC, producer state and
// control records), reads it back and walks it.
func TestLogAcceptsEveryBatch(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	l, err := wlog.Open(wlog.Options{FS: vfs.NewCrashableMem(), Dir: "p", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := bytes.Repeat([]byte("v"), 300) // multi-byte length varints
	batches := [][]byte{
		Encode([]Record{{[]byte("k1"), []byte("v1")}, {[]byte("k2"), nil}, {[]byte("k3"), big}}, now.UnixMilli(), -1, -1, 0),
		Encode([]Record{{[]byte("t1"), []byte("x")}}, now.UnixMilli(), 7, 2, wlog.AttrTransactional),
		Marker(7, 2, true, 4, now.UnixMilli()),
		Encode([]Record{{[]byte("t2"), []byte("y")}}, now.UnixMilli(), 8, 0, wlog.AttrTransactional),
		Marker(8, 0, false, 0, now.UnixMilli()),
	}
	for i, b := range batches {
		if _, err := l.Append(append([]byte(nil), b...), true); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	res, err := l.Read(0, 1<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	recs, next := collect(t, res.Data)
	if next != 7 || len(recs) != 7 {
		t.Fatalf("next %d, %d records", next, len(recs))
	}
	for i, r := range recs {
		if r.off != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.off)
		}
	}
	if string(recs[0].key) != "k1" || string(recs[0].value) != "v1" || recs[1].value != nil || !bytes.Equal(recs[2].value, big) {
		t.Fatalf("plain batch read back as %+v", recs[:3])
	}
	if recs[0].pid != -1 || recs[0].attrs != 0 || recs[3].pid != 7 || recs[3].epoch != 2 || recs[3].attrs != wlog.AttrTransactional {
		t.Fatalf("headers %+v %+v", recs[0], recs[3])
	}
	for i, want := range map[int]struct {
		typ   kmsg.ControlRecordKeyType
		epoch int32
	}{4: {kmsg.ControlRecordKeyTypeCommit, 4}, 6: {kmsg.ControlRecordKeyTypeAbort, 0}} {
		r := recs[i]
		var k kmsg.ControlRecordKey
		var v kmsg.EndTxnMarker
		if r.attrs != wlog.AttrTransactional|wlog.AttrControl || k.ReadFrom(r.key) != nil || v.ReadFrom(r.value) != nil {
			t.Fatalf("marker %d: %+v", i, r)
		}
		if k.Type != want.typ || v.CoordinatorEpoch != want.epoch {
			t.Fatalf("marker %d: key %+v value %+v", i, k, v)
		}
	}
	if l.LastStableOffset() != l.HighWatermark() {
		t.Fatalf("markers did not end the transactions: LSO %d HW %d", l.LastStableOffset(), l.HighWatermark())
	}
	if ab := l.AbortedTransactions(0, 7); len(ab) != 1 || ab[0].ProducerID != 8 {
		t.Fatalf("aborted %+v", ab)
	}
}

func TestWalkPartialAndCorrupt(t *testing.T) {
	a := Encode([]Record{{[]byte("a"), []byte("1")}}, 5, -1, -1, 0)
	b := Encode([]Record{{[]byte("b"), []byte("2")}, {[]byte("c"), []byte("3")}}, 5, -1, -1, 0)
	all := append(append([]byte(nil), a...), b...)
	for cut := 0; cut < len(b); cut++ {
		next, consumed, err := Walk(all[:len(a)+cut], func(*Batch) error { return nil })
		if err != nil && cut >= 12 {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if consumed != len(a) || next != 1 {
			t.Fatalf("cut %d: next %d consumed %d", cut, next, consumed)
		}
	}
	bad := append([]byte(nil), all...)
	bad[len(a)+40] ^= 1
	if _, consumed, err := Walk(bad, func(*Batch) error { return nil }); !errors.Is(err, ErrCorrupt) || consumed != len(a) {
		t.Fatalf("crc: consumed %d err %v", consumed, err)
	}
	short := append([]byte(nil), a...)
	short[11] = 10 // length below a header
	if _, _, err := Walk(short, func(*Batch) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("length: %v", err)
	}
	stop := fmt.Errorf("stop")
	if _, _, err := Walk(all, func(*Batch) error { return stop }); err != stop {
		t.Fatalf("callback error changed: %v", err)
	}
	comp := Encode([]Record{{[]byte("a"), nil}}, 5, -1, -1, 1)
	if _, _, err := Walk(comp, func(b *Batch) error {
		return b.Records(func(int64, []byte, []byte) error { return nil })
	}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("compressed batch walked: %v", err)
	}
}

func FuzzWalk(f *testing.F) {
	f.Add(Encode([]Record{{[]byte("k"), []byte("v")}, {[]byte("t"), nil}}, 1, -1, -1, 0))
	f.Add(Marker(3, 1, true, 2, 9))
	f.Add(append(Marker(3, 1, false, 0, 9), 0, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		next, consumed, err := Walk(data, func(b *Batch) error {
			if b.Compressed() {
				return nil
			}
			return b.Records(func(off int64, _, _ []byte) error { return nil })
		})
		if consumed < 0 || consumed > len(data) {
			t.Fatalf("consumed %d of %d", consumed, len(data))
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unwrapped error %v", err)
		}
		if consumed == 0 && next != -1 {
			t.Fatalf("next %d with nothing consumed", next)
		}
	})
}

package stream

import (
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The bytes a windowed operation writes to its output topic, for each kind
// of windows, against Kafka Streams' layouts written out by hand
// (WindowKeySchema.toBinary: key | start; SessionKeySchema.toBinary: key |
// end | start; big-endian longs; the key by its inner serializer — Java's
// StringSerializer (UTF-8) and LongSerializer (8 bytes big-endian) — and
// the count by LongSerializer), so a Java consumer with
// WindowedSerdes.timeWindowedSerdeFrom / sessionWindowedSerdeFrom reads
// them.
func TestWindowOutputKafkaBytes(t *testing.T) {
	type out struct{ key, value string }
	tests := []struct {
		name string
		w    Windows
		want []out // hex, in emission order
	}{
		{"tumbling", Tumbling(time.Second), []out{
			{"6162" + "00000000000003e8", "0000000000000001"}, // "ab" | start 1000
			{"6162" + "00000000000003e8", "0000000000000002"},
		}},
		{"sliding", Sliding(500 * time.Millisecond), []out{
			{"6162" + "00000000000001f4", "0000000000000001"}, // [500, 1000]
			{"6162" + "00000000000002bc", "0000000000000002"}, // [700, 1200]
			{"6162" + "00000000000003e9", "0000000000000001"}, // [1001, 1501]
		}},
		{"session", Session(time.Second), []out{
			{"6162" + "00000000000003e8" + "00000000000003e8", "0000000000000001"}, // [1000, 1000]: end | start
			{"6162" + "00000000000003e8" + "00000000000003e8", ""},                 // retracted
			{"6162" + "00000000000004b0" + "00000000000003e8", "0000000000000002"}, // [1000, 1200]
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuilder()
			WindowedCount(GroupByKey(From(b, "in", String(), Int64())), tt.w,
				WindowedStore{Name: "c", Late: DropLate(), Emit: EmitUpdates()}).
				ToStream().To("out", WindowedKeys(String(), tt.w), Int64())
			d, err := NewDriver("win", b, nil, StateDir(t.TempDir()), Watermarks(time.Hour, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, ts := range []int64{1000, 1200} {
				if _, err := d.Pipe("in", []byte("ab"), int64Bytes(1), time.UnixMilli(ts)); err != nil {
					t.Fatal(err)
				}
				if err := d.Process(); err != nil {
					t.Fatal(err)
				}
			}
			got := d.Records("out")
			if len(got) != len(tt.want) {
				var all []string
				for _, r := range got {
					all = append(all, hex.EncodeToString(r.Key)+"="+hex.EncodeToString(r.Value))
				}
				t.Fatalf("%d records %v, want %d", len(got), all, len(tt.want))
			}
			for i, w := range tt.want {
				k, v := hex.EncodeToString(got[i].Key), hex.EncodeToString(got[i].Value)
				if k != w.key || v != w.value || (w.value == "" && got[i].Value != nil) {
					t.Errorf("record %d: %s=%s, want %s=%s", i, k, v, w.key, w.value)
				}
			}
		})
	}
}

// Int64 keys are Java's LongSerializer bytes under the window suffix.
func TestWindowedInt64KeyKafkaBytes(t *testing.T) {
	tb, err := TimeWindowed(Int64(), time.Minute).Encode(Windowed[int64]{Key: -2, Start: ms(60_000), End: ms(120_000)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(tb), "fffffffffffffffe"+"000000000000ea60"; got != want {
		t.Fatalf("time-windowed int64 key %s, want %s", got, want)
	}
	sb, err := SessionWindowed(Int64()).Encode(Windowed[int64]{Key: 258, Start: ms(5), End: ms(9)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(sb), "0000000000000102"+"0000000000000009"+"0000000000000005"; got != want {
		t.Fatalf("session-windowed int64 key %s, want %s", got, want)
	}
}

// For every start Kafka accepts (>= 0), the decoded End is Kafka's
// WindowKeySchema.timeWindowForSize: start + size, or Long.MAX_VALUE when
// that is negative (overflowed).
func TestTimeWindowedEndIsKafkas(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kafkaEnd := func(start, size int64) int64 {
		if e := start + size; e >= 0 {
			return e
		}
		return math.MaxInt64
	}
	for i := range 2000 {
		start := rng.Int64N(math.MaxInt64)
		if i%2 == 0 {
			start = math.MaxInt64 - rng.Int64N(1<<40) // near the top: the end overflows
		}
		size := 1 + rng.Int64N(1<<40)
		c := TimeWindowed(String(), time.Duration(size)*time.Millisecond)
		b := append([]byte("k"), startSuffix(time.UnixMilli(start))...)
		w, err := c.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := w.End.UnixMilli(), kafkaEnd(start, size); got != want {
			t.Fatalf("start %d size %d: End %d, Kafka's %d", start, size, got, want)
		}
	}
}

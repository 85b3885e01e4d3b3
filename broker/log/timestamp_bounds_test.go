package log

import (
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// TestTimestampBounds: message.timestamp.before/after.max.ms with
// CreateTime. A record outside [now-before, now+after] fails the whole
// append with a *TimestampError naming it (counted across the batches);
// records without a timestamp (-1) pass; compressed batches are checked
// record by record too; the default after-bound is Kafka 4's hour and the
// before-bound is unlimited by default; LogAppendTime overwrites the
// producer's timestamps, so nothing is checked.
func TestTimestampBounds(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	clk := newClock()
	now := clk.Now().UnixMilli()
	type tc struct {
		name    string
		cfg     Config
		batches []testBatch
		refused bool
		bad     int64 // the offending timestamp, when refused
		index   int32 // its record
	}
	cases := []tc{
		{"default: an hour ahead", Config{}, []testBatch{{records: 2, firstTs: now + hour - 1, tsStep: 1}}, false, 0, 0},
		{"default: past the hour", Config{}, []testBatch{{records: 3, firstTs: now + hour - 1, tsStep: 1}}, true, now + hour + 1, 2},
		{"default: 1970 accepted", Config{}, []testBatch{{records: 1, firstTs: 0}}, false, 0, 0},
		{"default: no timestamp", Config{}, []testBatch{{records: 1, firstTs: -1}}, false, 0, 0},
		{"year 2100", Config{}, []testBatch{{records: 1, firstTs: 4_102_444_800_000}}, true, 4_102_444_800_000, 0},
		{"before bound", Config{TimestampBeforeMaxMs: 24 * hour}, []testBatch{
			{records: 3, firstTs: now},
			{records: 2, firstTs: now - 24*hour, tsStep: -1},
		}, true, now - 24*hour - 1, 4},
		{"before bound: 1970 refused", Config{TimestampBeforeMaxMs: 24 * hour}, []testBatch{{records: 1, firstTs: 0}}, true, 0, 0},
		{"before bound: no timestamp", Config{TimestampBeforeMaxMs: 24 * hour}, []testBatch{{records: 1, firstTs: -1}}, false, 0, 0},
		{"zero bounds: only now", Config{TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1}, []testBatch{{records: 2, firstTs: now, tsStep: 1}}, true, now + 1, 1},
		{"LogAppendTime: not checked", Config{TimestampType: LogAppendTime, TimestampBeforeMaxMs: 1}, []testBatch{{records: 1, firstTs: 0}}, false, 0, 0},
	}
	for _, codec := range []int{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd} {
		for _, c := range cases {
			t.Run(c.name+"/"+codecName(codec), func(t *testing.T) {
				l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Now: clk.Now, Config: c.cfg})
				defer l.Close()
				var data []byte
				for _, b := range c.batches {
					b.codec = codec
					data = append(data, b.build()...)
				}
				res, err := l.Append(data, true)
				if !c.refused {
					if err != nil {
						t.Fatalf("append: %v", err)
					}
					return
				}
				var te *TimestampError
				if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTimestamp) {
					t.Fatalf("append: %v (%+v), want a TimestampError", err, res)
				}
				if te.Timestamp != c.bad || te.Index != c.index {
					t.Fatalf("error %+v: want timestamp %d at record %d", te, c.bad, c.index)
				}
				if te.Min <= c.bad && c.bad <= te.Max {
					t.Fatalf("error range [%d, %d] contains %d", te.Min, te.Max, c.bad)
				}
				if hw := l.HighWatermark(); hw != 0 {
					t.Fatalf("high watermark %d after a refused append", hw)
				}
			})
		}
	}
}

func codecName(c int) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// TestValidateLargeCompressed: a compressed batch that decodes to more
// than a pooled buffer keeps (maxPooledSnappy) validates the same, every
// codec.
func TestValidateLargeCompressed(t *testing.T) {
	var c codecs
	for _, codec := range []int{codecGzip, codecSnappy, codecLZ4, codecZstd} {
		b := testBatch{records: maxPooledSnappy/1000 + 100, valueSize: 1000, firstTs: 5, tsStep: 1, codec: codec}.build()
		v, err := validateBatch(b, &c)
		if err != nil {
			t.Fatalf("%s: %v", codecName(codec), err)
		}
		if want := int64(5 + maxPooledSnappy/1000 + 99); v.recordsMaxTimestamp != want || v.recordsMinTimestamp != 5 {
			t.Fatalf("%s: timestamps [%d, %d], want [5, %d]", codecName(codec), v.recordsMinTimestamp, v.recordsMaxTimestamp, want)
		}
	}
}

package stream

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// withoutMarkers turns watermark markers off: the baseline pipeline of
// BenchmarkMarkerTraffic.
func withoutMarkers() Opt { return optFunc(func(c *config) { c.markers.off = true }) }

// BenchmarkMarkerTraffic measures what watermark markers add to a
// repartitioned pipeline's broker traffic at default settings
// (at-least-once, markers at most every 200ms, no idle timeout): the
// pipeline of keyByCount (3 input partitions, KeyBy, a 3-partition
// repartition topic, a count with its changelog, an output topic) run on
// the same input twice per iteration, alternately with markers and
// without (the baseline), on weir's broker. Traffic is what the broker
// appended to the pipeline's topics: bytes on disk (RecordBatch bytes, via
// DescribeLogDirs) and records (end offsets), the input included.
//
// -stream.marker-rate paces the input (records/s; 0: all at once, the
// pipeline runs as fast as it can): markers cost a fixed amount per unit
// of time (writers x partitions per interval, when the watermark moved),
// so their share grows as the data rate falls.
//
//	go test ./stream -run '^$' -bench MarkerTraffic -benchtime 2x
func BenchmarkMarkerTraffic(b *testing.B) {
	br := startBrokerB(b)
	const n = 30000
	rate := *markerRateFlag
	var with, base traffic
	for i := 0; i < b.N; i++ {
		for _, markers := range []bool{true, false} {
			tr := runMarkerPipeline(b, br, fmt.Sprintf("mt%d-%v", i, markers), n, rate, markers)
			if markers {
				with.add(tr)
			} else {
				base.add(tr)
			}
		}
	}
	b.ReportMetric(float64(base.bytes)/float64(b.N), "base-bytes")
	b.ReportMetric(float64(with.bytes)/float64(b.N), "markers-bytes")
	b.ReportMetric(float64(with.bytes-base.bytes)/float64(base.bytes)*100, "bytes-%-added")
	b.ReportMetric(float64(with.records-base.records)/float64(base.records)*100, "records-%-added")
	b.ReportMetric(float64(with.markers)/float64(b.N), "markers/run")
	b.ReportMetric(float64(with.markers)/float64(base.records)*100, "marker-records-%")
	// The bytes A/B above is dominated by batching noise (how a run's
	// records fall into batches); the markers' own bytes bound it: a
	// marker record is at most maxMarkerRecordBytes, plus a batch header
	// if it went alone in its batch (upper bound).
	b.ReportMetric(float64(with.markers*maxMarkerRecordBytes)/float64(base.bytes)*100, "marker-bytes-%")
	b.ReportMetric(float64(with.markers*(maxMarkerRecordBytes+batchHeaderBytes))/float64(base.bytes)*100, "marker-bytes-%-max")
	b.ReportMetric(with.seconds/float64(b.N), "s/run")
	b.ReportMetric(base.seconds/float64(b.N), "base-s/run")
}

var markerRateFlag = flag.Int("stream.marker-rate", 0, "BenchmarkMarkerTraffic: input records per second (0: all at once)")

// maxMarkerRecordBytes bounds a marker's RecordBatch v2 record: length,
// attributes, timestamp and offset deltas (varints, <= 5 + 3 bytes here),
// null key and value, one header "weir.wm" (7) with its 18-byte value.
// batchHeaderBytes is a RecordBatch's header (61 bytes).
const (
	maxMarkerRecordBytes = 2 + 1 + 5 + 3 + 1 + 1 + 1 + 1 + 7 + 1 + 18
	batchHeaderBytes     = 61
)

type traffic struct {
	bytes, records, markers int64
	seconds                 float64
}

func (t *traffic) add(o traffic) {
	t.bytes += o.bytes
	t.records += o.records
	t.markers += o.markers
	t.seconds += o.seconds
}

// runMarkerPipeline runs keyByCount as app id on n input records (1,000
// distinct values, event times 1ms apart) and returns the broker traffic
// of its topics.
func runMarkerPipeline(b *testing.B, br *testBroker, id string, n, rate int, markers bool) traffic {
	b.Helper()
	in, out := id+"-ev", id+"-out"
	br.createTopic(in, 3)
	br.createTopic(out, 3)
	topo := func(bl *Builder) {
		Count(GroupBy(From(bl, in, String(), String()), func(r Record[string, string]) (string, error) { return r.Value, nil },
			Codecs(String(), String())), StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To(out, String(), Int64())
	}
	opts := []Opt{StateDir(b.TempDir())}
	if !markers {
		opts = append(opts, withoutMarkers())
	}
	start := time.Now()
	app := br.run(id, topo, opts...)
	t0 := time.UnixMilli(1764633600000)
	batch := n
	if rate > 0 {
		batch = max(1, rate/10)
	}
	for i := 0; i < n; i += batch {
		recs := make([]*kgo.Record, 0, batch)
		for j := i; j < min(n, i+batch); j++ {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint("u", j%5000)), Value: []byte(fmt.Sprint("zone-", j%1000)),
				Timestamp: t0.Add(time.Duration(j) * time.Millisecond)})
		}
		br.produce(recs...)
		if rate > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for counterValue(app.a.metrics.recordsIn) < float64(2*n) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: %v of %d records handled", id, counterValue(app.a.metrics.recordsIn), 2*n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	mk := int64(counterValue(app.a.metrics.markersOut))
	if err := app.stop(); err != nil {
		b.Fatal(err)
	}
	topics := []string{in, id + "-n-repartition", id + "-n-changelog", out}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dirs, err := br.adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := traffic{markers: mk, seconds: secs}
	per := map[string]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		for _, topic := range topics {
			for _, p := range d.Topics[topic] {
				tr.bytes += p.Size
				per[topic[len(id)+1:]] += p.Size
			}
		}
	})
	b.Logf("%s: bytes per topic %v", id, per)
	ends, err := br.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		b.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) { tr.records += o.Offset })
	return tr
}

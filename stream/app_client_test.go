package stream

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The App's producer sends uncompressed batches by default (outputs and
// changelog records); ClientOpts overrides the default.
func TestProducerCompressionDefault(t *testing.T) {
	b := startBroker(t)
	b.createTopic("events", 1)
	b.createTopic("counts", 1)
	build := func(bl *Builder) {
		in := From(bl, "events", String(), String())
		Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("counts", String(), Int64())
	}
	truth := map[string]int64{}
	produceEvents(b, 0, 20, 5, truth)
	app := b.run("plain", build, testLogger(t), StateDir(t.TempDir()), CommitInterval(50*time.Millisecond))
	b.waitFor("counts", 30*time.Second, counted(t, 20))
	if err := app.stop(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"counts", "plain-c-changelog"} {
		recs := b.readAll(topic)
		if len(recs) == 0 {
			t.Fatalf("%s: no records", topic)
		}
		for _, r := range recs {
			if c := r.Attrs.CompressionType(); c != 0 {
				t.Fatalf("%s offset %d: compression type %d, want 0 (none)", topic, r.Offset, c)
			}
		}
	}

	b.createTopic("counts2", 1)
	build2 := func(bl *Builder) {
		in := From(bl, "events", String(), String())
		Count(GroupByKey(in, Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour}).ToStream().To("counts2", String(), Int64())
	}
	app2 := b.run("snappy", build2, testLogger(t), StateDir(t.TempDir()), CommitInterval(50*time.Millisecond),
		ClientOpts(kgo.ProducerBatchCompression(kgo.SnappyCompression())))
	recs := b.waitFor("counts2", 30*time.Second, counted(t, 20))
	if err := app2.stop(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if c := r.Attrs.CompressionType(); c != 2 {
			t.Fatalf("counts2 offset %d: compression type %d, want 2 (snappy, from ClientOpts)", r.Offset, c)
		}
	}
}

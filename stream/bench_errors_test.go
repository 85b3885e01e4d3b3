package stream

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkPoisonRecords measures the run time of 3,000 records of which 30
// fail deterministically (a plain error), on a real broker, under the
// default error policy and under the policy before issue 16 (every error
// retried: RetryIf(always), 3 attempts, backoff 100ms doubling), in the same
// run; it reports each policy's seconds per run and their ratio. Run it with
// -benchtime=1x.
func BenchmarkPoisonRecords(bm *testing.B) {
	b := startBrokerB(bm)
	seconds := map[string]float64{}
	for _, c := range []struct {
		name string
		opts []Opt
	}{
		{"retry-every-error(before)", []Opt{RetryIf(func(error) bool { return true })}},
		{"default(after)", nil},
	} {
		bm.Run(c.name, func(bm *testing.B) {
			var total time.Duration
			for i := range bm.N {
				in, out := fmt.Sprintf("poison-in-%s-%d", c.name[:3], i), fmt.Sprintf("poison-out-%s-%d", c.name[:3], i)
				b.createTopic(in, 1)
				b.createTopic(out, 1)
				recs := make([]*kgo.Record, 3000)
				for j := range recs {
					v := "ok"
					if j%100 == 50 {
						v = "bad"
					}
					recs[j] = &kgo.Record{Topic: in, Key: []byte(key(j % 20)), Value: []byte(v)}
				}
				b.produce(recs...)
				start := time.Now()
				a := b.run(fmt.Sprintf("poison-%s-%d", c.name[:3], i), func(bl *Builder) {
					Map(From(bl, in, String(), String()), func(r Record[string, string]) (string, error) {
						if r.Value == "bad" {
							return "", errors.New("bad record")
						}
						return r.Value, nil
					}).To(out, String(), String())
				}, append([]Opt{StateDir(bm.TempDir()), CommitInterval(20 * time.Millisecond)}, c.opts...)...)
				b.waitForB(out, 120*time.Second, 2970)
				total += time.Since(start)
				if err := a.stop(); err != nil {
					bm.Fatal(err)
				}
			}
			seconds[c.name] = total.Seconds() / float64(bm.N)
			bm.ReportMetric(seconds[c.name], "s/run")
		})
	}
	if before, after := seconds["retry-every-error(before)"], seconds["default(after)"]; before > 0 && after > 0 {
		bm.Logf("3000 records, 30 failing: before %.2fs, after %.2fs, after/before %.3f", before, after, after/before)
	}
}

// waitForB waits until topic holds at least n records.
func (b *testBroker) waitForB(topic string, timeout time.Duration, n int) {
	b.waitFor(topic, timeout, func(r []*kgo.Record) bool { return len(r) >= n })
}

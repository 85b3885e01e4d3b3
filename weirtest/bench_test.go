package weirtest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// scopedTB runs the cleanups registered during one iteration at its end,
// so a benchmark iteration measures a whole broker lifetime.
type scopedTB struct {
	testing.TB
	cleanups []func()
}

func (s *scopedTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scopedTB) done() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// BenchmarkStartStop is the cost of one test's broker: start on a fresh
// data dir (listening when Start returns), then clean shutdown.
func BenchmarkStartStop(b *testing.B) {
	for b.Loop() {
		s := &scopedTB{TB: b}
		Start(s)
		s.done()
	}
}

// BenchmarkStartWithTopicStop adds creating one 3-partition topic over the
// wire (CreateTopics through a franz-go admin client).
func BenchmarkStartWithTopicStop(b *testing.B) {
	for b.Loop() {
		s := &scopedTB{TB: b}
		Start(s, Topic("t", 3))
		s.done()
	}
}

// BenchmarkStartStopMem is BenchmarkStartStop with MemStorage (no disk
// I/O, plus the relay).
func BenchmarkStartStopMem(b *testing.B) {
	for b.Loop() {
		s := &scopedTB{TB: b}
		Start(s, MemStorage())
		s.done()
	}
}

// BenchmarkKfakeStartStop is the baseline: franz-go's in-memory fake
// Kafka (pkg/kfake, no durability), one broker, started and closed.
func BenchmarkKfakeStartStop(b *testing.B) {
	for b.Loop() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

package stream

import (
	"fmt"
	"testing"
)

// The property runs (random input, graceful stops, wiped state directories,
// kills) with the store cache disabled, and so small that every round evicts
// and flushes: aggregates still match the model, under at-least-once and
// exactly-once.
func TestPropertyStoreCache(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		g     Guarantee
		seed  uint64
	}{
		{0, AtLeastOnce, 200}, {256, AtLeastOnce, 201}, {256, AtLeastOnce, 202},
		{0, ExactlyOnce, 300}, {256, ExactlyOnce, 301},
	} {
		t.Run(fmt.Sprintf("cache=%d/%v/seed%d", c.bytes, c.g, c.seed), func(t *testing.T) {
			propertyRun(t, c.seed, c.g, StoreCache(c.bytes))
		})
	}
}

func TestStoreCacheValidation(t *testing.T) {
	if _, err := NewApp("a", NewBuilder(), Brokers("127.0.0.1:1"), StoreCache(-1)); err == nil {
		t.Fatal("negative store cache accepted")
	}
}

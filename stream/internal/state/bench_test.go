package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCommitNewKeys is a round of the keyed-count workload on a store
// whose keys are all new: a Get (absent) and a Put per key, 1000 keys per
// Commit, keys in random order. Baseline in the same run:
// BenchmarkCommitNewKeysNoCache (every Get goes to Pebble).
func BenchmarkCommitNewKeys(b *testing.B) { benchCommitNewKeys(b, DefaultCacheBytes<<4) }

func BenchmarkCommitNewKeysNoCache(b *testing.B) { benchCommitNewKeys(b, 0) }

func benchCommitNewKeys(b *testing.B, cache int64) {
	d, err := Open(b.TempDir(), nil, CacheBytes(cache))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([][]byte, b.N)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "zone-%09d", rng.Uint64N(1<<40))
	}
	val := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	b.ResetTimer()
	txn := d.Begin()
	for i, k := range keys {
		if _, _, _, err := txn.Get("c", k); err != nil {
			b.Fatal(err)
		}
		if _, err := txn.Put("c", k, val, int64(i/1000)); err != nil {
			b.Fatal(err)
		}
		txn.Apply()
		if i%1000 == 999 {
			if err := txn.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := txn.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFlushNewKeys times the write of a cache full of new keys to
// Pebble (what a checkpoint after a round of the keyed-count benchmark
// does): 33,334 dirty keys in random order, one data key and one TTL index
// key each.
func BenchmarkFlushNewKeys(b *testing.B) {
	const n = 33334
	rng := rand.New(rand.NewPCG(1, 1))
	val := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	for i := range b.N {
		b.StopTimer()
		d, err := Open(b.TempDir(), nil, CacheBytes(DefaultCacheBytes<<4))
		if err != nil {
			b.Fatal(err)
		}
		txn := d.Begin()
		for j := range n {
			k := fmt.Appendf(nil, "zone-%06d", rng.Uint64N(1_000_000))
			if _, err := txn.Put("c", k, val, int64(i*n+j)/100); err != nil {
				b.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := d.flushDirty(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

package state

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
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

// BenchmarkFlushUpdatedKeys times the flush of a cache whose 33,334 keys were
// all updated since the last flush, 1/3 s of event time later (the steady
// state of the keyed count: every key updated each commit interval). Per
// TTL: "exact" is the exact index (version 1's three writes per update),
// "1h" the buckets of a one-hour TTL (the data key alone), the ratio of the
// two measured in the same run.
func BenchmarkFlushUpdatedKeys(b *testing.B) {
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"exact", 0}, {"1h", time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 33334
			d, err := Open(b.TempDir(), nil, CacheBytes(DefaultCacheBytes<<4), StoreTTL("c", c.ttl))
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			rng := rand.New(rand.NewPCG(1, 1))
			keys := make([][]byte, n)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "zone-%06d", rng.Uint64N(1_000_000))
			}
			val := []byte{0, 0, 0, 0, 0, 0, 0, 1}
			ts := int64(1_700_000_000_000)
			round := func() {
				txn := d.Begin()
				for i, k := range keys {
					// 100k records a second: a round is 1/3 s of
					// event time.
					if _, err := txn.Put("c", k, val, ts+int64(i)/100); err != nil {
						b.Fatal(err)
					}
				}
				if err := txn.Commit(); err != nil {
					b.Fatal(err)
				}
				txn.Discard()
				ts += n / 100
			}
			round()
			if err := d.flushDirty(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := processCPU(b)
			for range b.N {
				b.StopTimer()
				round()
				b.StartTimer()
				if err := d.flushDirty(); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time per round, Pebble's background
			// memtable flushes and compactions included (the timed
			// wall time excludes them when they overlap the untimed
			// rounds).
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/round")
		})
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRoundsSteady is the store's side of the steady keyed count: 33k
// keys already in the cache, each record a Get and a Put of a key in a
// scattered order, a Commit every 500 records and a checkpoint flush every
// 33k. Per op: one record, the flushes included (the process's CPU too).
func BenchmarkRoundsSteady(b *testing.B) { benchRoundsSteady(b, 500) }

// BenchmarkRoundsSteadyEOS is BenchmarkRoundsSteady with the Txn an
// exactly-once transaction holds: ~8k records (100 ms of one task's share)
// between two Commits. Baseline in the same run: BenchmarkRoundsSteady.
func BenchmarkRoundsSteadyEOS(b *testing.B) { benchRoundsSteady(b, 8000) }

func benchRoundsSteady(b *testing.B, commitEvery int) {
	const keys = 33_334 // one task's share of 100k keys over 3 partitions
	d, err := Open(b.TempDir(), nil, StoreTTL("c", time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ks := make([][]byte, keys)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "zone-%06d", i)
	}
	val := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	txn := d.Begin()
	record := func(i int) {
		k := ks[(i*7919)%keys]
		if _, _, _, err := txn.Get("c", k); err != nil {
			b.Fatal(err)
		}
		if _, err := txn.Put("c", k, val, 1_700_000_000_000+int64(i)/100); err != nil {
			b.Fatal(err)
		}
		txn.Apply()
		if i%commitEvery == commitEvery-1 {
			if err := txn.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if i%keys == keys-1 {
			if err := d.WriteCheckpoint(Checkpoint{"c": int64(i)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range keys {
		record(i)
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := range b.N {
		record(keys + i)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

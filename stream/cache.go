package stream

import "github.com/weirhq/weir/stream/internal/state"

// defaultStoreCache is StoreCache's default: 10 MiB per task, Kafka Streams'
// cache.max.bytes.buffering default.
const defaultStoreCache = state.DefaultCacheBytes

// StoreCache sets the memory budget, in bytes per task, of the cache in
// front of the task's local stores. Default: 10 MiB. 0 disables it.
//
// The cache holds the latest state of the keys a task has seen. A read of a
// cached key (the read-modify-write of every aggregate) needs no Pebble
// lookup, and when every key of a store fits — a new or freshly restored
// store, or one small enough to be loaded on open — a key not in the cache is
// known to be new without a lookup either. Writes are held in the cache and
// reach the local Pebble database once per commit (or when the cache is
// full), so a key updated many times between commits is written once.
//
// An eighth of the same budget bounds, per task, the table updates
// collapsed between commits (see Table): past it, the task forwards them at
// the end of its round; with 0 it forwards them at the end of every round.
// Otherwise this cache only spares Pebble reads and writes. A commit
// makes the local store durable (with its checkpoint) only after the
// changelog records it covers are acknowledged, so crash recovery is as
// without it: the local store plus the changelog tail.
func StoreCache(bytes int64) Opt { return optFunc(func(c *config) { c.storeCache = bytes }) }

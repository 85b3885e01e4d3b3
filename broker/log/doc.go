// Package log is weir's storage engine: one Kafka partition stored as a
// directory of segments, with crash recovery, indexes and retention. It
// knows RecordBatch v2 framing and nothing of the Kafka protocol, and does
// all file I/O through vfs.FS (the OS, a crashable in-memory FS for tests,
// or an error-injecting wrapper).
//
// # Files of a partition directory
//
//	<topic>-<partition>/
//	  00000000000000000000.log        segment: RecordBatch v2 bytes, as served to consumers
//	  00000000000000000000.index      sparse offset index of that segment
//	  00000000000000000000.timeindex  time index of that segment
//	  00000000000000004242.log        next segment, base offset 4242 ...
//	  00000000000000004242.index
//	  00000000000000004242.timeindex
//	  00000000000000000000.txnindex   aborted transactions of that closed segment (only if any)
//	  00000000000000004300.snapshot   producer state at offset 4300 (the newest 2 are kept)
//	  recovery-point                  last durable checkpoint (also the clean-shutdown marker)
//	  log-start-offset                set by DeleteRecords (absent until then)
//	  cleaner-checkpoint              compacted logs: the cleaner's passes (end offset, time)
//	  clean-swap, *.cleaned           a compaction swap in progress (completed or undone on open)
//
// A segment is named by its base offset (the offset of its first batch) in
// 20 decimal digits. The last segment is the active one; the others are
// closed and never change until retention deletes them or, for compacted
// logs, the cleaner replaces a group of them by one cleaned segment (see
// clean.go and clean_swap.go: offsets preserved with gaps, tombstones kept
// for delete.retention.ms, a crash-atomic swap through .cleaned files and
// the clean-swap commit file; docs/format/log.md has the formats).
//
// # Segment (.log): pure Kafka framing, no header
//
//	+---------------------------+---------------------------+-----
//	| RecordBatch v2            | RecordBatch v2            | ...
//	| baseOffset int64          |                           |
//	| batchLength int32         |                           |
//	| partitionLeaderEpoch int32|                           |
//	| magic int8 = 2            |                           |
//	| crc uint32 (CRC-32C of    |                           |
//	|   attributes..end)        |                           |
//	| attributes ... records    |                           |
//	+---------------------------+---------------------------+-----
//
// The bytes are exactly what a Fetch returns: on append the log sets
// baseOffset (and partitionLeaderEpoch = 0), neither covered by the CRC;
// with LogAppendTime (or a producer's wrong maxTimestamp under CreateTime)
// it rewrites maxTimestamp and the timestamp-type bit and recomputes the
// CRC, as Kafka does. Offsets increase strictly from batch to batch.
//
// # Index files (.index, .timeindex)
//
//	header, 16 bytes
//	+--------+---------+----------+-------------------+
//	| magic  | version | reserved | base offset int64 |
//	| 4 B    | 1 B = 1 | 3 B = 0  | = file name       |
//	+--------+---------+----------+-------------------+
//	magic "WOIX" (.index) or "WTIX" (.timeindex)
//
//	.index entry, 8 bytes            .timeindex entry, 12 bytes
//	+-----------------+-----------+  +-----------------+-----------------+
//	| relative offset | position  |  | timestamp int64 | relative offset |
//	| uint32          | uint32    |  |                 | uint32          |
//	+-----------------+-----------+  +-----------------+-----------------+
//
// An .index entry maps the base offset (base + relative) of a batch to its
// byte position; one is added when at least index.interval.bytes follow the
// previous entry (position 0 is implied). A .timeindex entry (ts, rel) says
// every record up to and including the batch at base+rel has a timestamp
// <= ts; entries are added with .index entries when the segment's max
// timestamp grew, and once more when the segment is closed, so a closed
// segment's last entry is its max timestamp (used by retention.ms without
// reading the segment). Index files are derived data: a missing or damaged
// one is rebuilt from its segment.
//
// # recovery-point (52 bytes) and log-start-offset (20 bytes)
//
//	+--------+---------+-------+----------+----------+----------+-----------+-------+-----------+--------+
//	| "WRCP" | version | flags | reserved | seg base | position | next off. | maxTs | maxTs off.| crc32c |
//	|        | 1 B = 1 | 1 B   | 2 B      | int64    | int64    | int64     | int64 | int64     | uint32 |
//	+--------+---------+-------+----------+----------+----------+-----------+-------+-----------+--------+
//	+--------+---------+----------+--------------+--------+
//	| "WLSO" | version | reserved | offset int64 | crc32c |
//	+--------+---------+----------+--------------+--------+
//
// Both are replaced atomically (write temp, fsync, rename, fsync dir) and
// checked by CRC-32C (Castagnoli) over the bytes before it. The recovery
// point promises that every byte of segment <seg base> below <position> and
// all earlier segments are durable, that <next off.> is the offset of the
// batch at <position>, and that the segment's index entries below
// <position> are durable. flags bit 0: written by a clean Close.
//
// All integers are big-endian. Frozen (part of the format; change only with
// a version bump): the file names and their 20-digit base offsets, the
// magics "WOIX", "WTIX", "WRCP", "WLSO", "WPSN", "WTXI", version 1, the header and entry
// sizes and field order above, CRC-32C, and Kafka's RecordBatch v2 layout.
//
// # Producer state: idempotence and transactions (producer.go)
//
// Per producer id the log keeps the epoch, the last 5 batches' sequences
// and offsets, the first offset of its ongoing transaction and the
// coordinator epoch of its last marker; Append checks every batch against
// it under the append lock (duplicate -> AppendResult.Duplicate with the
// original offsets, ErrOutOfOrderSequence, ErrInvalidProducerEpoch,
// ErrInvalidTxnState) and applies the change only once the batch is
// written. Control batches (COMMIT/ABORT markers) end transactions; an
// ABORT adds (pid, first offset, marker offset) to the aborted-transaction
// index. LastStableOffset = min(first offset of ongoing transactions, high
// watermark); AbortedTransactions(from, to) answers a read_committed Fetch
// from memory (the whole index is in memory, 24 bytes per aborted
// transaction; the files are its persistence).
//
// .snapshot files (magic "WPSN", version 1, CRC-32C) hold the producer
// state at an offset and the aborted transactions of the then-active
// segment; they are written at every roll, checkpoint and clean Close.
// .txnindex files (magic "WTXI", version 1, CRC-32C) hold a closed segment's
// aborted transactions, written at the roll. Open loads the newest snapshot
// at or below the log end (a damaged one is skipped, an older one used)
// with the .txnindex files below it, then replays the batches after it —
// those the recovery scan reads anyway, so a crash costs no extra I/O. With
// no usable snapshot (or a damaged .txnindex) the whole log is replayed. A
// failed fsync's rollback rebuilds the state the same way. Retention and
// DeleteRecords forget producers whose last batch is below the log start and
// that have no ongoing transaction, and each retention pass those idle for
// more than ProducerIDExpirationMs (1 day, Kafka's producer.id.expiration.ms
// default); their next batch is accepted at any sequence, as Kafka. Layouts: producer_files.go and docs/format/log.md.
//
// # Durability (SyncPolicy)
//
// SyncAlways (default) is group commit: appenders write under the append
// lock, then wait for an fsync covering their bytes; the first waiter to
// find no fsync running leads one for everything written so far, and all
// who arrive meanwhile share the next. The high watermark covers only
// synced data. A non-durable append is synced promptly by a background
// goroutine; WaitDurable then waits (bounded by a context) for the fsync
// covering it, which splits a durable append in two: a caller appends all
// it has (several partitions, several pipelined requests) before waiting,
// and one fsync per partition covers it all. A failed fsync rolls back
// every append it did not cover (their callers and waiters get ErrStorage;
// readers never saw them). SyncInterval fsyncs
// every interval and shows data at once: acknowledged data can be lost on
// power loss (not on a process crash).
//
// # Recovery
//
// Open trusts the recovery point: segments before it are not read (their
// sizes come from the file system, their indexes load lazily on first use,
// within a memory budget), and only the bytes after it are scanned, checking
// framing, CRC-32C and offset order. The first bad batch starts a torn or
// corrupt tail, which is truncated and logged with a *CorruptionError
// naming segment and byte position. Synced data is a prefix of written data,
// so nothing synced lies behind a torn write: an acknowledged batch is never
// dropped. Without a usable recovery point only the last segment is
// scanned: a segment is closed only after its data and index files are
// fsynced. The recovery point advances in the background once 64 MiB were
// synced since the last one (or after 10 s with any change), on roll and on
// Close, so a crash recovery scans about 64 MiB at most; after a clean Close
// it is at the end of the log, and Open scans nothing.
//
// # Retention
//
// Only whole closed segments are deleted: from the oldest, while the
// segment's max timestamp is older than retention.ms, the log exceeds
// retention.bytes by at least that segment, or the segment lies below the
// log start offset (DeleteRecords, persisted first). When every segment is
// expired by time the active one is rolled so it can go too (as Kafka).
// A segment being read stays open (reference count) until its readers
// finish; its files are removed then.
//
// # Concurrency
//
// A *Log is goroutine-safe. Appends are serialised; reads run concurrently
// with appends and each other. Lock order: ckptMu, metaMu, mu (append),
// segsMu, seg.idxFileMu, seg.mu, syncMu; ckptFileMu is a leaf.
package log

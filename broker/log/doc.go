// Package log is weir's storage engine: one Kafka partition stored as a
// directory of segments, with crash recovery, indexes, retention and
// compaction. It knows RecordBatch v2 framing and nothing of the Kafka
// protocol, and does all file I/O through vfs.FS (the OS, a crashable
// in-memory FS for tests, or an error-injecting wrapper).
//
// The on-disk format — file names, layouts with their diagrams, the frozen
// constants, the recovery algorithm, durability, retention and compaction —
// is described once, in docs/format/log.md. Changing a file layout means
// changing that document and bumping the file's version.
//
// # Invariants
//
//   - A segment (<base>.log, named by its base offset in 20 digits) holds
//     RecordBatch v2 bytes exactly as a Fetch returns them; offsets strictly
//     increase; only the last segment is appended to.
//   - Every other file starts with a magic and a version and ends with a
//     CRC-32C (index files: a magic, version and base offset header); small
//     metadata files are replaced atomically (vfs.WriteFileAtomic).
//   - Under SyncAlways an acknowledged (durable) append is fsynced, and the
//     high watermark covers only synced data. A failed write or fsync rolls
//     back every append it did not cover; readers never saw them.
//   - Synced bytes are a prefix of written bytes, so recovery, which
//     truncates a torn or corrupt tail (a *CorruptionError naming segment
//     and position), never drops an acknowledged batch. Open scans only what
//     follows the recovery point (about 64 MiB at most; nothing after a
//     clean Close).
//   - Index, time index, producer snapshot and aborted-transaction index
//     files are derived data: a damaged one is rebuilt from the segments.
//   - Retention and compaction delete or replace whole closed segments
//     only; a compaction swap is crash-atomic (the directory holds the old
//     or the new segment set, never a mix).
//
// # Concurrency
//
// A *Log is goroutine-safe. Appends are serialised; reads run concurrently
// with appends and each other. The lock order is stated on Log.
package log

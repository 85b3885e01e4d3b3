// Package txn is weir's transaction coordinator: it hands out producer ids
// (to idempotent and transactional producers), keeps each transactional
// id's state machine, writes transaction markers, aborts transactions that
// time out and fences zombie producers, as Kafka's TransactionCoordinator
// does (KIP-98, KIP-360, KIP-447, KIP-588, KIP-664, KIP-890 parts 1 and 2),
// error code for error code; the few deliberate differences are listed
// under "Deviations from Kafka".
//
// # States
//
//	Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                        │    └──EndTxn/timeout/fence──▶ PrepareAbort ──markers──▶ CompleteAbort
//	  └──InitProducerId (epoch bump) ◀── Complete*      Complete* ──AddPartitions──▶ Ongoing
//	Complete*/Empty idle past transactional.id.expiration.ms ──▶ Dead (tombstone, forgotten)
//
// PrepareEpochFence exists in Kafka only as a pending, never persisted,
// state; here the fence is written directly as PrepareAbort with the bumped
// epoch. The numeric state values are Kafka's and are on disk.
//
// # Durability and recovery
//
// Every transition is one record appended, durable (fsynced), to the single
// partition of the compacted internal topic "__transaction_state" before
// the response that depends on it is sent; in memory the state changes
// only after the append returned, so memory is always a replay of the log.
// Records use Kafka's schemas, so the topic reads as Kafka's does:
//
//	key   = int16 version (0) | string transactional id          (TxnMetadataKey)
//	value = int16 version (1) | int64 producer id | int16 epoch |
//	        int32 timeout ms | int8 state | [topic [partition]] |
//	        int64 last update ms | int64 start ms |
//	        tagged: previous producer id, next producer id,
//	                client transaction version                   (TxnMetadataValue)
//	value = null: the transactional id expired (tombstone)
//
// plus one weir record, the producer id block:
//
//	key   = int16 32767
//	value = int16 0 | int64 end (exclusive) of the reserved block of ids
//
// Producer ids are handed out from a block whose end is durable before the
// first id of it is used (ProducerIDBlockSize ids per record), so an id is
// never given twice, even after a crash. Each batch is an uncompressed
// RecordBatch v2 without producer id. An unknown key version is skipped
// (logged); an undecodable record fails NewCoordinator (ErrCorruptState).
//
// On start the log is replayed: a transaction found in PrepareCommit or
// PrepareAbort has all its markers written again (a marker is idempotent,
// so partitions that had theirs before the crash get a harmless second)
// and then completes; an Ongoing one is aborted when its timeout passes
// (its start time is in the record). The last epoch (which lets a
// producer's KIP-360 retry claim its epoch) is kept in memory only, as in
// Kafka.
//
// # Concurrency
//
// All state is owned by one goroutine, the loop (broker/internal/ownerloop,
// shared with the group coordinator). Handle and Verify send a closure to
// it; a request that needs a state change parks its reply until the writer
// goroutine (broker/internal/ilog) appended the record, in loop order,
// coalescing queued records into one fsync. Marker writes run on their own
// goroutines (at most 64 at a time) and report back to the loop. Time
// comes only from Options.Now: timeouts, expiration and marker retries are
// checked by Tick, which the loop's timer calls (armed for the next scan or
// marker retry) and tests call after advancing a fake clock.
//
// # Answering EndTxn
//
// Kafka answers EndTxn once PrepareCommit/PrepareAbort is durable; the
// producer's next transaction then meets CONCURRENT_TRANSACTIONS until the
// markers are written, which franz-go's Produce retries only after a
// metadata refresh (5 s by default). weir decides at the same point but
// answers once the transaction completed (EndTxnCompletionWait bounds the
// wait; a stuck marker does not hold the client longer), which removes that
// stall from every commit-every-N-ms pipeline.
//
// # Deviations from Kafka
//
//   - EndTxn is answered when the transaction completed (see above), not at
//     the prepare.
//   - EndTxn v5 with the epoch a still-completing prepare bumped to is
//     CONCURRENT_TRANSACTIONS (Kafka: PRODUCER_FENCED, fatal to a
//     legitimate producer that ends its next transaction early).
//   - A producer id block is a record in __transaction_state (key version
//     32767) instead of a KRaft metadata record.
//   - The coordinator epoch is constant (one node, the coordinator never
//     moves).
//
// # Transaction versions
//
// A client uses transaction version 2 (KIP-890 part 2) when the broker
// finalizes the feature transaction.version=2: EndTxn v5 bumps the epoch
// on every commit/abort and answers the new one, Produce v12+ adds a
// partition implicitly (Verify with implicitAdd), TxnOffsetCommit v5 adds
// the offsets partition. Older clients (EndTxn v0-4, explicit
// AddPartitionsToTxn/AddOffsetsToTxn) keep one epoch across transactions.
// Both are served; the version of each transaction is recorded.
//
// # What the log and the broker provide
//
// The per-partition producer state lives with the log, atomic with append
// (as Kafka's ProducerStateManager), not here:
//
//   - Idempotence: per (partition, producer id) the epoch and the last 5
//     batches' (first seq, last seq, offset); a duplicate answers success
//     with the original offset, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an
//     epoch below the current one INVALID_PRODUCER_EPOCH, an unknown
//     producer with seq != 0 UNKNOWN_PRODUCER_ID (or accept, KIP-360);
//     a new epoch must start at seq 0. Snapshots plus rebuild from the log.
//   - Transactions: the first offset of each ongoing (pid) transaction; a
//     marker (Partitions.WriteMarker) ends it: appends the control batch
//     (MarkerBatch: COMMIT/ABORT, coordinator epoch, base sequence -1,
//     which the log's batch validation must accept), records an aborted transaction
//     (pid, first offset, last offset) in the segment's aborted index, and
//     advances the last stable offset = min(first offset of ongoing txns,
//     high watermark). A marker for a pid with no ongoing transaction in
//     that partition is still written (idempotent re-send after recovery,
//     harmless to readers). A marker with an epoch below the producer's
//     current one is rejected (INVALID_PRODUCER_EPOCH); coordinator epochs
//     are constant here (CoordinatorEpoch).
//   - read_committed Fetch: data up to the LSO, the aborted transactions
//     overlapping the fetched range; ListOffsets latest = LSO.
//   - DescribeProducers from the partition's producer state.
//   - The broker: routes FindCoordinator key type 1, InitProducerId (all),
//     AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
//     DescribeTransactions, ListTransactions to Handle; advertises
//     APIVersions and the feature transaction.version (supported 0-2,
//     finalized 2); in Produce, for each transactional batch, calls Verify
//     once per request with the partitions (resolved topic names, also for
//     v13; implicitAdd for v12+), answers the returned codes, appends the
//     verified ones and then calls release.
//     A non-transactional batch from a producer with an ongoing transaction
//     is the log's INVALID_TXN_STATE.
package txn

// Package stream is weir's stream-processing library: typed topologies over
// Kafka-protocol topics, with keyed state, repartitioning, dead-letter
// routing, and at-least-once or exactly-once delivery. It talks only the
// Kafka protocol (franz-go), so the same program runs on weir's embedded
// broker, on Kafka or on Redpanda.
//
//	b := stream.NewBuilder()
//	rides := stream.From(b, "rides", stream.String(), stream.JSON[Ride]())
//	perZone := stream.Count(stream.GroupBy(rides, func(r stream.Record[string, Ride]) (string, error) { return r.Value.Zone, nil }),
//		stream.StoreConfig{Name: "rides-per-zone", TTL: 24 * time.Hour})
//	perZone.ToStream().To("rides-per-zone", stream.String(), stream.Int64())
//	app, err := stream.NewApp("surge", b, stream.Brokers("127.0.0.1:9092"))
//	...
//	err = app.Run(ctx) // until ctx is done; then flush, commit, leave the group
//
// Declaring a topology never panics: an operator whose declaration fails
// records the error and returns an invalid stream (or table); every operator
// applied to it does nothing more, and NewApp returns the errors.
//
// # Processing model
//
// A record carries key, value, event timestamp (the Kafka record timestamp
// or a source's Timestamps extractor — never the processing clock), headers
// and origin (topic, partition, offset). Operators carry timestamp, headers
// (a W3C traceparent among them) and origin to what they emit.
//
// The topology is cut at every repartition topic into sub-topologies: the
// connected parts of the graph (a Merge or a Join connects its inputs),
// numbered in the order of their first source. A task is (sub-topology,
// partition p), named "<sub-topology>_<p>" (as Kafka Streams' TaskId): it
// consumes partition p of every source topic of its sub-topology and runs
// its operators one record at a time on one goroutine: given the same input
// and state it produces the same output. A sub-topology has as many tasks as
// its largest source has partitions. Tasks are the unit of state, commit and
// rebalance; an App runs its tasks on Workers goroutines and shares them with
// other processes of the same app id through one consumer group, whose
// balancer assigns by task (all partitions of a task to one member; sticky;
// cooperative: a rebalance revokes only the tasks that move, after committing
// them, and hands them over in a second round).
//
// Within a round, a task reading several topics processes the records it
// fetched from them in Kafka timestamp order (ties: a table's topic first),
// each partition's records in offset order.
//
// # Tables and joins
//
// FromTable materialises a (compacted) topic in a store: the latest value per
// key, a tombstone deleting the key. Its changelog is the topic itself: a
// task restores it from its local checkpoint (or the start) up to the
// group's committed offset, then consumes the topic as a source; no changelog
// topic is created, no TTL applies (the compacted topic bounds it). Join and
// LeftJoin look each stream record's key up in the table, in the task owning
// that partition: the stream and the table must be co-partitioned (same key
// and partitioning, same partition count — checked by Run, which fails with
// ErrPartitionMismatch naming the topics and their counts). A stream whose
// key changed (KeyBy) is first repartitioned to the table's partition count.
//
// Stateful operators (Count, Reduce, Aggregate, Stream.ToTable) return a
// Table (Kafka Streams' KTable): joinable like a topic's table, queryable by
// its store name, turned back into a stream of updates with ToStream. They
// keep a Pebble store per task backed by the compacted topic
// "<app>-<store>-changelog" (partition = the task's partition). A keyed
// operator after KeyBy/GroupBy, or after a Merge of several sources, first
// writes its input to "<app>-<store>-repartition" (partitioned by murmur2 of
// the key, like Java clients), so each key lives in exactly one task
// (CombineRounds ahead of it merges each processing round's records per key,
// so the repartition carries one record per key and round). Codecs
// are inferred (InferCodec: string, []byte, int64, JSON for structs, maps and
// slices) or given with Codecs. Every store states its bound: a TTL in event
// time (expired keys are deleted with a changelog tombstone), or NoExpiry
// with its reason, which Describe reports as a risk. A table's updates are
// collapsed between commits (Kafka Streams' record cache, bounded by an
// eighth of StoreCache per task): the changelog, ToStream and Changes carry
// the latest value per key since the previous commit, flushed before every
// commit of input offsets (at-least-once) and before every transaction commits
// (ExactlyOnce), so every committed offset is covered by the updates it
// caused (EveryUpdate forwards each; the Driver flushes after every record).
// ToStream forwards deletions (a topic's tombstones, expired keys) as
// records with Record.Tombstone set, which a sink writes as null values;
// Changes pairs every update with the value it replaced. On assignment a
// task restores its stores from the local checkpoint plus the changelog
// tail (or the whole changelog if there is no usable local copy) before
// processing.
//
// Tables join tables: JoinTables, LeftJoinTables and OuterJoinTables on the
// key (co-partitioned, as a stream-table join), JoinForeign and
// LeftJoinForeign on a foreign key extracted from the left table's values
// (no co-partitioning: subscriptions travel to the right table's tasks and
// answers back through two internal topics, and an answer to a value the
// left table no longer holds is dropped, so a row whose foreign key changed
// leaves no stale result). Each result is a table of its own (a store with
// a changelog). A global table (FromGlobalTable) is replicated whole to
// every instance, restored from its topic before processing starts and then
// followed on a goroutine of the instance; JoinGlobal and LeftJoinGlobal look
// it up by any key derived from a record. Every instance answers queries of
// its store (Get, Range, the HTTP API) from its own replica.
//
// Streams join streams within a time bound (Kafka Streams' JoinWindows,
// Flink's interval join): JoinStreams, LeftJoinStreams and OuterJoinStreams
// pair a left record at t with every right record of its key in
// [t - Before, t + After]. Both inputs are co-partitioned (checked at start;
// an input whose key changed is repartitioned) and buffered in one store with
// a changelog, each record until its join window closes — the watermark
// passes t + After + Grace (left) or t + Before + Grace (right) — and is then
// deleted. An unmatched record of an outer side is emitted only then (Kafka
// Streams 3.1+, not the old eager emission): a record whose match arrives
// later, within the grace, never has an unmatched result. A record later
// than its time + Grace goes to the declared late policy (DropLate,
// LateToTopic, LateToDLQ). The matched flags and the close index are in the
// store too, so a restore rebuilds them; under ExactlyOnce results, buffers
// and offsets commit in one transaction.
//
// What a stateful task costs: on disk, its Pebble directory under StateDir —
// about 4.5 MiB for a store of a few keys (Pebble preallocates the write-ahead
// log at 110% of the 4 MiB memtable) plus its data; in memory, its store
// cache (StoreCache: up to 10 MiB by default, filled as keys are written),
// Pebble's memtables (from 256 KiB up to 4 MiB, two while one is flushed)
// and Pebble's block cache (up to 2 MiB). A task without stores has no
// directory.
//
// # Errors
//
// A record that fails goes to the App's dead-letter topic "<app>.dlq"
// (DLQPerTopic: "<input>.dlq") with the HeaderDLQ* headers: the failing
// operator (Named), the reason, and the original input record's topic,
// partition and offset, also after a repartition. A record whose key or value
// does not decode, that panics, or whose error is not worth retrying (see
// IsRetriable, RetryIf, Permanent) goes there at once; a retriable error is
// retried in place (MaxAttempts, RetryBackoff; an operator's Retry
// overrides) — a failed attempt leaves no store writes and no outputs. The
// partition goes on either way. Failures of the runtime itself (a produce
// the cluster rejects, a local store I/O error) stop Run with an error and
// commit nothing past them.
//
// # Delivery
//
// AtLeastOnce (default): input offsets are committed only after every
// output, changelog, repartition and dead-letter record derived from them is
// acknowledged (acks=all, idempotent producer). A crash replays uncommitted
// input: outputs may hold duplicates and counts may exceed the true counts.
//
// ExactlyOnce: the processing rounds of one commit interval (100ms by
// default) across the instance's tasks form one Kafka transaction holding
// their outputs, changelog writes and input offsets; stores apply it only
// once it committed, inputs and changelogs are read read_committed.
// Rebalances are allowed only between transactions (a waiting rebalance ends
// the open one early), so they never abort the work of tasks that stay.
// Committed offsets step over transaction markers, so a consumer lag of 0 is
// reachable on transactional inputs. App.Guarantees and App.Describe state,
// per topic written, the guarantee and its mechanism.
//
// # Crash recovery: static membership
//
// Every App is a static member of its consumer group (KIP-345): its
// group.instance.id is "<app id>-<instance id>", the instance id generated at
// the first start and kept in the state directory (GroupInstanceID overrides
// it). A process killed without warning (kill -9, OOM, power loss) and
// restarted on the same state directory rejoins as the same member and takes
// its tasks back at once, with no rebalance, then replays its changelog tails
// and the input since the last commit; a dynamic member would wait for its
// dead predecessor's session timeout (45s) first. An App that stops leaves
// the group explicitly, so its tasks move at once. Under ExactlyOnce the same
// instance id names its transactional id, so the restart also fences the
// transaction the killed process left open.
//
// # Where event time attaches
//
// Watermarks, timers and windows extend the task, not the topology. The
// pieces are internal packages, each tested on its own; the watermark is
// wired into the task (eventtime*.go). How each plugs in:
//
//   - stream/internal/watermark.Tracker: one per task. At creation the task
//     adds each input partition — a source topic's, or a repartition
//     topic's with its upstream sub-topology's task count as writers — and
//     resumes the state its local database kept and the state its
//     partitions' committed offsets carry (commit metadata, "weir.wm1:";
//     the larger of the two per value). Where the task keeps its stream time
//     it also observes the record's input; each round end (also a tick
//     round) advances the watermark on the App's clock (idleness is
//     processing time; the Watermarks option sets the bound and idle
//     timeout). Every offset commit carries the state of the committed
//     partition (at-least-once: the OffsetCommit; ExactlyOnce: the
//     transaction's TxnOffsetCommit, so it commits or aborts with the
//     outputs), so a task resumed anywhere — another instance, a fresh state
//     directory — never goes back; an aborted transaction takes the tracker
//     back to where the task joined it. The checkpoint write syncs the local
//     copy (state meta "watermark"). Metrics (task and per input partition
//     watermark, event-time lag, idle inputs), App.Watermarks and
//     App.Describe show it.
//   - Watermark markers (watermark.MarkerHeader "weir.wm",
//     docs/format/watermark.md): a task writing a repartition topic sends
//     one to every partition of it at the end of its rounds, at most every
//     WatermarkMarkers interval (200ms) and only when its watermark or idle
//     state changed (or half the idle timeout passed), in the round's
//     transaction under ExactlyOnce. A reader recognises them before the
//     source decodes anything (never data, never the DLQ) and takes the
//     minimum over the upstream writers; a stalled writer holds it until the
//     idle timeout. `weir consume` shows them as markers (or skips them).
//     The Driver sends none unless WatermarkMarkers is given: there a
//     repartition topic's watermark follows its records, as a source's.
//   - stream/internal/window: the windowed operators (see "Windows")
//     assign each record with TimeWindows.AssignTo (tumbling, hopping,
//     calendar in a time zone), Sliding.Add or Sessions.Merge, skip the
//     windows whose CloseAt the watermark reached (a record none of whose
//     windows is open is late and goes to the declared late policy), and,
//     at the end of each round, emit and delete every window whose CloseAt
//     <= watermark.
//   - stream/internal/timekey: the keys of those stores. A window store
//     keeps 'w' | key | end | start -> aggregate (one key's windows are one
//     scan: KeyWindows) and the close index 'c' | end | key | start (the
//     windows a watermark closes are one scan: EndingBy); timers are
//     domain | fire time | key | name (FiringBy). They are ordinary keyed
//     stores: same changelog, checkpoint and TTL machinery as the
//     aggregates'. A round ends by firing the timers and closing the windows
//     the watermark passed, inside the round's transaction under
//     ExactlyOnce. Timers are done: see "Timers and the low-level
//     processor".
//   - Windowed[K] with TimeWindowed and SessionWindowed (windowed.go) are the
//     public key type and codecs of windowed results, byte-compatible with
//     Kafka Streams' windowed serdes.
//
// # Windows
//
// WindowedCount, WindowedReduce and WindowedAggregate aggregate a Grouped
// stream per key and window — Tumbling, Hopping (both optionally offset, or
// laid on a time zone's calendar with WindowIn), Sliding or Session — into
// a Table keyed by Windowed[K], whose codecs (WindowedKeys) are Kafka
// Streams' windowed serdes. A WindowedStore names the store and states the
// time semantics; none has a default:
//
//	w := stream.Hopping(time.Minute, 10*time.Second)
//	perZone := stream.WindowedCount(stream.GroupByKey(rides), w,
//		stream.WindowedStore{Name: "demand", Grace: 5 * time.Second,
//			Late: stream.LateToTopic("rides-late"), Emit: stream.EmitFinal()})
//	perZone.ToStream().To("demand", stream.WindowedKeys(stream.String(), w), stream.Int64())
//
// A window closes when the task's watermark (see Watermarks) reaches its
// end plus Grace (sliding windows: end + 1 + Grace; sessions: end + gap +
// 1 + Grace, until then a record may extend them). A record all of whose
// windows are closed is late and goes where Late says: DropLate (counted),
// LateToTopic, LateToDLQ, or LateUpdates (updates the windows while the
// store retains them, Retain after their close, and emits corrections; for
// every kind of windows, sessions included: a late record may extend or
// merge sessions). A
// record only some of whose hopping windows are closed updates the open
// ones (the others are counted as "partial"). EmitFinal emits one result
// per window when it closes (optionally early partial results), EmitUpdates
// every change. Hopping windows with EmitFinal keep one partial per key
// and pane (gcd(size, advance) wide; a key's panes in one entry when a
// window holds at most 32) instead of one per window, combined
// when a window closes (window slicing; see Hopping for the conditions;
// the layout is part of the store's declaration, stated by App.Describe).
// Windows live in the task's Pebble store under keys laid out
// so that one key's windows, and the windows a watermark closes, are one
// ordered scan each; every write goes to the store's changelog, so a
// restore rebuilds windows and close index alike, and a closed window is
// deleted with changelog tombstones. All of it happens in the task's round:
// under ExactlyOnce in its transaction, so a final result is committed
// exactly once across crashes and rebalances (the store also keeps the
// watermark it last closed windows at, so a new owner whose watermark
// starts lower never reopens a closed window).
//
// Where Kafka Streams and Flink differ, weir follows:
//   - When windows close: the watermark (Flink), not Kafka's stream time
//     (the largest timestamp seen). Stream time closes a window while a
//     lagging partition of the task still holds its records; the watermark
//     is the minimum over the task's partitions, minus the out-of-orderness
//     bound, and skips idle ones. With one partition and no bound the two
//     agree.
//   - Grace: Kafka's meaning (results wait for it: EmitFinal emits at end +
//     grace, Kafka's suppress(untilWindowCloses) and Flink's
//     allowedLateness with a final-only trigger), not Flink's default of an
//     on-time result at the end and one more per late record; that one is
//     LateUpdates with Retain.
//   - Late records: neither drops them silently here (Kafka drops them into
//     a metric, Flink drops them or sends them to a side output): the policy
//     is a required decision.
//   - Emission: required, no default (Kafka defaults to updates, Flink to
//     final results: code written for one would be silently wrong with the
//     other's default). EmitUpdates emits every change (Kafka's
//     withCachingDisabled), not Kafka's cached, per-commit updates.
//   - Sliding windows: Kafka's SlidingWindows (a window per distinct set of
//     records within the time difference, both ends inclusive). Flink's
//     "sliding" windows are weir's (and Kafka's) Hopping.
//   - Sessions: Kafka's (gap inclusive, session [first, last] record time);
//     merging sessions combines their aggregates with the merge function
//     (Kafka's Merger, Flink's AggregateFunction.merge), and, as Kafka does,
//     a session absorbed by a merge or extension whose result was emitted is
//     retracted downstream with a tombstone.
//   - Result timestamps: a window's last instant (end - 1 for time windows,
//     end for sliding and session windows; Flink's maxTimestamp), not
//     Kafka's largest record timestamp, so results do not depend on the
//     order records arrived in.
//   - Retention: a window is deleted when it closes (+ Retain), not kept for
//     Kafka's retention period by segment; queries see open (and retained)
//     windows.
//
// # Timers and the low-level processor
//
// Process is Kafka Streams' Processor API, typed: a handler per record with
// the stores it declared (KeyValueStore, KeyValueWindowStore; each with a
// TTL or NoExpiry), Forward to a typed downstream, the record's metadata, the task's
// watermark and processing time, and timers keyed by (key, name):
// event-time timers fire when the watermark reaches them, processing-time
// timers when the App's ProcessingClock does. Timers are keyed state in the
// store "<name>-timers" with its changelog, so they survive restarts and
// moves. A round's records are handled first; then, at the round's end (also
// of a tick round, with no records), the due timers fire in time order, each
// as one all-or-nothing unit with its deletion (inside the round's
// transaction under ExactlyOnce: a fired timer's outputs appear exactly
// once). A failing callback sends the timer to the dead-letter topic. The
// Driver (and streamtest) move processing time with AdvanceProcessingTime
// and run rounds without records with Tick; event time moves with the
// records piped.
//
// # Bounded runs
//
// App.RunBounded reads each input up to its end offsets at start (under
// ExactlyOnce its last stable offsets; UpTo: up to a timestamp), then moves
// every watermark to the end of time — every event-time timer fires, every
// window closes — one sub-topology at a time in topological order, so a task
// downstream of a repartition reaches the end only after all its upstream
// wrote (as Flink at the end of a bounded source); then it commits and
// returns. Processing-time timers do not fire at the end (Flink quiesces
// them too), and the end-of-time watermark is not persisted: a later run
// resumes from the records. The Driver's EndOfInput does the same in tests.
//
// # Queryable state and standby replicas
//
// A running App answers point lookups and key ranges on its stores (App.Get,
// App.Range, the typed QueryStore, and the HTTP API of QueryHandler, served
// on an address with QueryServer). A key's partition is murmur2 of its
// encoded bytes, as the partitioner placed it; a partition another instance
// owns is forwarded to the endpoint that instance advertises in its group
// subscription (the group view, read with DescribeGroups after every
// rebalance). Reads see what the task flushed: under ExactlyOnce, committed
// transactions only. With StandbyReplicas(n), each task's next n members in
// member-id order tail its changelog into the task's local directory and
// checkpoint, so a takeover replays only the changelog tail; queries with
// AllowStale read those copies when the active task cannot answer. A copy of
// a table (whose changelog is its source topic) is kept only up to the
// group's committed offset of its partition, where the new owner resumes
// processing: a record replayed from there never sees table values from its
// future. Directories of tasks an instance no longer runs or copies are
// deleted after StateCleanupDelay (default 10 minutes).
//
// # Not yet
//
// Waiting for a lagging input of a task before processing (Kafka's
// max.task.idle.ms).
// A keyed operator after a Merge of several sources still repartitions
// first (merged topics need not be co-partitioned).
package stream

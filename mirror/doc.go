// Package mirror copies topics from one Kafka-protocol cluster to another
// (weir to Kafka or Redpanda, back, or weir to weir), continuously and
// restartably, as Kafka's MirrorMaker 2 does, and moves consumer groups
// across with their positions. It depends on franz-go only: any cluster
// that speaks the protocol is a source or a target.
//
// # What is copied
//
// Topics are selected by name or by a regular expression (a cluster's "__"
// topics never match) and created on the target with the source's
// partition count and explicitly set topic configs, optionally renamed with
// a prefix. Topics and partitions that appear later are picked up at the
// next rescan. Records keep their key, value, headers, timestamp and
// partition, and their order within the partition (an idempotent producer
// keeps it across retries), hence per-key order. The source is read
// read_committed: aborted transactional records are not copied, committed
// ones are copied as plain records, and transaction markers are not copied
// (so target offsets differ from source offsets; see offset translation).
// A topic with message.timestamp.type=LogAppendTime keeps that config on the
// target, whose broker then stamps the copies with its own append time.
//
// # Progress and restart
//
// The mirror keeps its progress on the target, in two topics named by its
// ID: "weir-mirror.<ID>.progress" (compacted: the last offset sync of every
// partition) and "weir-mirror.<ID>.offset-syncs" (every sync, for
// translating group offsets). An offset sync (s, t) of a partition states:
// every source data record below s is on the target, and the target's
// committed data records from t on are the copies, in order, of the source's
// from s on. The mirror writes one per copied batch and partition, after
// the batch is acknowledged.
//
// At-least-once (the default): records are produced with acks=all by an
// idempotent producer, pipelined; a batch's sync is written once its records
// and every earlier batch of the partition are acknowledged. A restart
// resumes from the last stored sync. If the mirror stopped abruptly (kill
// -9) after records reached the target but before their sync was stored,
// the restart compares those target records with the next source records
// (key, value, headers, timestamp) and skips the equal ones: nothing is
// copied twice. Only if they differ (another writer on the target topic) is
// the copy resumed at the sync, leaving on the target duplicates of at most
// the records written after the last stored sync.
//
// Exactly-once (Config.ExactlyOnce): each round's copies and syncs are
// written in one transaction on the target (transactional id
// "weir-mirror.<ID>"); a new instance fences the previous one and aborts
// its open transaction, and resumes from the committed progress. A
// read_committed reader of the target sees each source record exactly once;
// a read_uncommitted one may see aborted copies.
//
// # Consumer groups
//
// Cutover moves a stopped group: its committed offset G on the source is
// translated through the last sync (s, t) with s <= G by counting the
// source's data records in [s, G) and skipping as many data records on the
// target from t. The group resumes on the target at the copy of its next
// source record: no gap, and no record read twice. The one window: records
// of [s, G) removed from the source (retention, compaction) between their
// copy and the cutover are not counted, so the group reads again at most
// the records of that one in-flight batch — never fewer than it should.
//
// Continuous group offset sync (Config.SyncGroups, a regular expression of
// group names; MirrorMaker 2's sync.group.offsets.enabled): while the
// mirror runs, every Config.SyncGroupsInterval, the committed source offsets
// of the selected groups are translated as Cutover translates them and
// committed for the same group on the target. A partition is translated
// only once the mirror has copied up to the group's offset; a translation
// at or below the target group's committed offset is not committed (a
// target group never moves backwards); a group with members on the target
// is not written to (checked before each commit, and refused by the broker
// with UNKNOWN_MEMBER_ID should a member join in between). The guarantee is
// Cutover's for a group that stops on the source and starts on the target
// after the next sync round: it resumes at the copy of its next source
// record, no gap, at most the records of one in-flight batch read twice. A
// consumer started on the target before that round resumes at the previous
// round's translation and reads again what the group read on the source
// since (with no earlier translation at all, where its reset policy says).
// Offset commit metadata is not copied.
//
// # Metrics
//
// Registered with Config.Registerer, each labelled mirror=<ID>:
// weir_mirror_copied_records_total and weir_mirror_copied_bytes_total (by
// source topic), weir_mirror_lag_records and weir_mirror_lag_seconds (by
// topic and partition: source offsets not yet copied at the last fetch, and
// the age of the last record copied while behind, 0 when caught up),
// weir_mirror_offset_syncs_total, weir_mirror_restarts_total,
// weir_mirror_restart_skipped_records_total,
// weir_mirror_source_data_loss_total, and, by group,
// weir_mirror_group_offsets_synced_total (partition offsets committed on the
// target by the group offset sync) and weir_mirror_group_sync_skipped_total
// (rounds that left a group alone: members on the target). Status reports the same lag from the
// stored progress, without the mirror running.
package mirror

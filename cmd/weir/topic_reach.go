package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker"
	wlog "github.com/weirhq/weir/broker/log"
)

// Replay reach: how far back a consumer can replay a partition, derived from
// what the cluster reports over the Kafka protocol, never assumed:
//
//   - log start / end offsets: ListOffsets (earliest, latest);
//   - the log start's timestamp: the first record batch at the log start,
//     read with one Fetch per leader (its first timestamp, or its max
//     timestamp when the topic uses LogAppendTime);
//   - size: DescribeLogDirs;
//   - retention.ms, retention.bytes, cleanup.policy: DescribeConfigs.
//
// The cleaner's progress (the offset below which a compacted partition holds
// only the latest value per key) is not exposed by the Kafka protocol: it
// comes from weir's admin API when that answers for the same topic
// (topic_admin.go), and is stated as unknown otherwise (then only "the
// latest value per key before the end offset" is guaranteed).

// partitionReach is the replay reach of one partition (JSON output).
type partitionReach struct {
	Partition      int32  `json:"partition"`
	Leader         int32  `json:"leader"`
	LogStartOffset int64  `json:"log_start_offset"`
	StartTimestamp string `json:"log_start_timestamp,omitempty"` // RFC 3339, UTC
	StartTsMillis  int64  `json:"log_start_timestamp_ms"`        // -1 unknown / empty
	EndOffset      int64  `json:"end_offset"`
	Records        int64  `json:"records"` // end - start (an upper bound when compacted)
	SizeBytes      int64  `json:"size_bytes"`
	RetentionMs    int64  `json:"retention_ms"`
	RetentionBytes int64  `json:"retention_bytes"`
	CleanupPolicy  string `json:"cleanup_policy"`
	Reach          string `json:"replay_reach"`
	// Cleaner: compacted partitions, when weir's admin API answered;
	// otherwise CleanerUnknown says why the progress is unknown.
	Cleaner        *partitionCleaner `json:"cleaner,omitempty"`
	CleanerUnknown string            `json:"cleaner_unknown,omitempty"`
	Error          string            `json:"error,omitempty"`
}

// topicReach is one topic of `topic describe --output json`.
type topicReach struct {
	Topic             string            `json:"topic"`
	ID                string            `json:"id"`
	Internal          bool              `json:"internal,omitempty"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs"` // set on the topic
	Partitions        []partitionReach  `json:"partitions"`
}

// topicConfigs returns the effective values of the configs reach needs.
func reachConfigs(rc kadm.ResourceConfig) (retMs, retBytes int64, policy string, tsType string) {
	retMs, retBytes, policy, tsType = 604800000, -1, "delete", "CreateTime"
	for _, c := range rc.Configs {
		v := c.MaybeValue()
		switch c.Key {
		case "retention.ms":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				retMs = n
			}
		case "retention.bytes":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				retBytes = n
			}
		case "cleanup.policy":
			policy = v
		case "message.timestamp.type":
			tsType = v
		}
	}
	return
}

// firstTimestamps fetches, per partition of topic, the first batch at its
// log start and returns its timestamp (-1 if the partition is empty or the
// fetch failed; errors are per partition).
//
// One Fetch per leader asks for all of its partitions with
// PartitionMaxBytes=1. By KIP-74 only the first partition of a response
// with data is sure to get its (oversized) first batch; the others may come
// back empty. So the partitions still unanswered are asked again, in
// rounds, until each has its batch, an error, or a round answers nothing
// new (then they stay unknown): at most one round per partition, usually
// one in all (weir and many brokers answer every partition at once).
func firstTimestamps(ctx context.Context, cl *kgo.Client, d kadm.TopicDetail, starts, ends kadm.ListedOffsets, logAppendTime bool) (map[int32]int64, map[int32]error) {
	ts := map[int32]int64{}
	errs := map[int32]error{}
	byLeader := map[int32][]int32{}
	for _, p := range d.Partitions.Sorted() {
		ts[p.Partition] = -1
		s, e := offsetOf(starts, d.Topic, p.Partition), offsetOf(ends, d.Topic, p.Partition)
		if s < 0 || e <= s || p.Leader < 0 {
			continue
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
	}
	for leader, pending := range byLeader {
		answered := map[int32]bool{}
		for len(pending) > 0 {
			if n := fetchFirstBatches(ctx, cl, leader, d, starts, pending, logAppendTime, ts, errs, answered); n == 0 {
				break
			}
			pending = slices.DeleteFunc(pending, func(p int32) bool { return answered[p] })
		}
	}
	return ts, errs
}

// fetchFirstBatches sends one Fetch for the log start of parts to leader and
// records each first batch's timestamp in ts, or the error in errs, marking
// the partition answered. It returns how many partitions it answered.
func fetchFirstBatches(ctx context.Context, cl *kgo.Client, leader int32, d kadm.TopicDetail, starts kadm.ListedOffsets,
	parts []int32, logAppendTime bool, ts map[int32]int64, errs map[int32]error, answered map[int32]bool) int {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = d.Topic
	rt.TopicID = d.ID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = offsetOf(starts, d.Topic, p)
		rp.PartitionMaxBytes = 1 // the first partition with data gets one whole batch
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	kr, err := cl.Broker(int(leader)).Request(ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(kr.(*kmsg.FetchResponse).ErrorCode)
	}
	if err != nil {
		for _, p := range parts {
			errs[p] = err
			answered[p] = true
		}
		return len(parts)
	}
	n := 0
	for _, t := range kr.(*kmsg.FetchResponse).Topics {
		for _, rp := range t.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs[rp.Partition] = err
				answered[rp.Partition] = true
				n++
				continue
			}
			var rb kmsg.RecordBatch
			if len(rp.RecordBatches) == 0 || rb.ReadFrom(rp.RecordBatches) != nil {
				continue
			}
			v := rb.FirstTimestamp
			// LogAppendTime: the batch's time is its max. A delete
			// horizon (KIP-534: a cleaned transaction marker or
			// tombstone batch) replaces firstTimestamp.
			if logAppendTime || rb.Attributes&(wlog.AttrLogAppendTime|wlog.AttrDeleteHorizon) != 0 {
				v = rb.MaxTimestamp
			}
			ts[rp.Partition] = v
			answered[rp.Partition] = true
			n++
		}
	}
	return n
}

// reachText states a partition's replay reach.
func reachText(p partitionReach) string {
	if p.LogStartOffset < 0 || p.EndOffset < 0 {
		return "unknown (offsets unavailable)"
	}
	compact := strings.Contains(p.CleanupPolicy, "compact")
	del := strings.Contains(p.CleanupPolicy, "delete") || !compact
	var parts []string
	switch {
	case p.EndOffset == p.LogStartOffset:
		parts = append(parts, fmt.Sprintf("empty: nothing to replay (next offset %d)", p.EndOffset))
	case p.StartTsMillis >= 0:
		parts = append(parts, fmt.Sprintf("replayable from offset %d, %s", p.LogStartOffset, time.UnixMilli(p.StartTsMillis).UTC().Format("2006-01-02T15:04Z")))
	default:
		parts = append(parts, fmt.Sprintf("replayable from offset %d (timestamp unknown)", p.LogStartOffset))
	}
	var limits []string
	if del {
		if p.RetentionMs >= 0 {
			limits = append(limits, "retention "+durationText(p.RetentionMs))
		}
		if p.RetentionBytes >= 0 {
			limits = append(limits, fmt.Sprintf("at most %s kept", bytesText(p.RetentionBytes)))
		}
		if len(limits) == 0 {
			limits = append(limits, "unlimited retention")
		}
	}
	if len(limits) > 0 {
		parts[0] += " (" + strings.Join(limits, ", ") + ")"
	}
	if compact && p.EndOffset > p.LogStartOffset {
		parts = append(parts, compactedText(p))
	}
	return strings.Join(parts, "; ")
}

// compactedText states what compaction left of a partition's history.
func compactedText(p partitionReach) string {
	c := p.Cleaner
	if c == nil {
		why := p.CleanerUnknown
		if why == "" {
			why = "not reported"
		}
		return fmt.Sprintf("compacted: only the latest value per key is guaranteed before offset %d (cleaner progress unknown: %s)", p.EndOffset, why)
	}
	var s string
	if c.CleanedUpTo <= p.LogStartOffset {
		s = fmt.Sprintf("compacted: not cleaned yet, full history from offset %d", p.LogStartOffset)
	} else {
		s = fmt.Sprintf("compacted: only the latest value per key before offset %d (cleaned), full history from %d", c.CleanedUpTo, c.CleanedUpTo)
	}
	if c.LastCleanTime != "" {
		s += fmt.Sprintf(" (last cleaned %s, dirty ratio %.2f)", c.LastCleanTime, c.DirtyRatio)
	}
	return s
}

// durationText prints milliseconds as d/h/m/s when exact.
func durationText(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms%(24*3600*1000) == 0:
		return fmt.Sprintf("%dd", ms/(24*3600*1000))
	case ms%(3600*1000) == 0:
		return fmt.Sprintf("%dh", ms/(3600*1000))
	case ms%(60*1000) == 0:
		return fmt.Sprintf("%dm", ms/(60*1000))
	}
	return d.String()
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// reachSources is what the cluster says of topics that describeReach reads.
type reachSources struct {
	starts, ends kadm.ListedOffsets
	cfgs         kadm.ResourceConfigs
	sizes        kadm.DescribedAllLogDirs // nil: the cluster refused
}

// gatherReach asks the cluster for the offsets, configs and sizes of
// topics (found in details).
func gatherReach(ctx context.Context, adm *kadm.Client, details kadm.TopicDetails, topics []string) (reachSources, error) {
	var rs reachSources
	var err error
	if rs.starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
		return rs, fmt.Errorf("list start offsets: %w", err)
	}
	if rs.ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
		return rs, fmt.Errorf("list end offsets: %w", err)
	}
	if rs.cfgs, err = adm.DescribeTopicConfigs(ctx, topics...); err != nil {
		return rs, fmt.Errorf("describe configs: %w", err)
	}
	set := kadm.TopicsSet{}
	for _, t := range topics {
		for _, p := range details[t].Partitions.Sorted() {
			set.Add(t, p.Partition)
		}
	}
	if rs.sizes, err = adm.DescribeAllLogDirs(ctx, set); err != nil {
		rs.sizes = nil // sizes are optional (a cluster may refuse the request)
	}
	return rs, nil
}

// describeReach gathers the reach of every partition of d.
func describeReach(ctx context.Context, adm *kadm.Client, cl *kgo.Client, d kadm.TopicDetail, starts, ends kadm.ListedOffsets, rc kadm.ResourceConfig, sizes kadm.DescribedAllLogDirs, admin adminSource) []partitionReach {
	retMs, retBytes, policy, tsType := reachConfigs(rc)
	tss, errs := firstTimestamps(ctx, cl, d, starts, ends, tsType == "LogAppendTime")
	var cleaners map[int32]broker.AdminPartition
	cleanerErr := ""
	if strings.Contains(policy, "compact") {
		var err error
		if cleaners, err = admin.partitions(ctx, d.Topic, topicID(d.ID)); err != nil {
			cleanerErr = err.Error()
		}
	}
	var out []partitionReach
	for _, p := range d.Partitions.Sorted() {
		r := partitionReach{
			Partition: p.Partition, Leader: p.Leader,
			LogStartOffset: offsetOf(starts, d.Topic, p.Partition), EndOffset: offsetOf(ends, d.Topic, p.Partition),
			StartTsMillis: tss[p.Partition], SizeBytes: -1,
			RetentionMs: retMs, RetentionBytes: retBytes, CleanupPolicy: policy,
		}
		if r.LogStartOffset >= 0 && r.EndOffset >= 0 {
			r.Records = r.EndOffset - r.LogStartOffset
		}
		if r.StartTsMillis >= 0 {
			r.StartTimestamp = time.UnixMilli(r.StartTsMillis).UTC().Format(time.RFC3339)
		}
		if dirs, ok := sizes[p.Leader]; ok {
			if lp, ok := dirs.LookupPartition(d.Topic, p.Partition); ok {
				r.SizeBytes = lp.Size
			}
		}
		if strings.Contains(policy, "compact") {
			if ap, ok := cleaners[p.Partition]; ok {
				r.Cleaner = cleanerOf(ap, admin.addr)
			} else if cleanerErr != "" {
				r.CleanerUnknown = cleanerErr
			} else {
				r.CleanerUnknown = "partition missing from the admin API's answer"
			}
		}
		if err := errs[p.Partition]; err != nil {
			r.Error = "first record: " + err.Error()
		} else if p.Err != nil {
			r.Error = p.Err.Error()
		}
		r.Reach = reachText(r)
		out = append(out, r)
	}
	return out
}

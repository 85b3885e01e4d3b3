package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
)

// Topic configs. Every topic config Kafka defines that a client may set is
// accepted (unknown names are INVALID_CONFIG, as in Kafka); the ones marked
// applied change the broker's or the log's behaviour, the rest are stored
// and described back but have no effect (replication, throttles, tiered
// storage, flush tuning): their DescribeConfigs documentation starts with
// notEnforced and says why. Values are validated by type and range when set.

type configType int8

const (
	ctBool   configType = 1
	ctString configType = 2
	ctInt    configType = 3
	ctLong   configType = 5
	ctDouble configType = 6
	ctList   configType = 7
)

type topicConfigDef struct {
	name     string
	typ      configType
	def      string // Kafka default
	synonym  string // the broker config that sets the default ("" none)
	min      int64  // for ints and longs
	max      int64
	enum     []string // allowed values (lists: allowed items)
	applied  bool     // changes the broker's or the log's behaviour
	doc      string   // what it does; for one not applied, why not
	readOnly bool
}

const maxInt32 = 1<<31 - 1

// topicConfigDefs is immutable after package initialisation.
var topicConfigDefs = func() map[string]topicConfigDef {
	defs := []topicConfigDef{
		{name: "cleanup.policy", typ: ctList, def: "delete", synonym: "log.cleanup.policy", enum: []string{"delete", "compact"}, applied: true,
			doc: "delete: retention removes old segments; compact: keep the latest record per key"},
		{name: "retention.ms", typ: ctLong, def: "604800000", synonym: "log.retention.ms", min: -1, max: 1<<63 - 1, applied: true,
			doc: "age after which a segment is deleted (-1: unlimited)"},
		{name: "retention.bytes", typ: ctLong, def: "-1", synonym: "log.retention.bytes", min: -1, max: 1<<63 - 1, applied: true,
			doc: "partition size above which old segments are deleted (-1: unlimited)"},
		{name: "segment.bytes", typ: ctInt, def: "1073741824", synonym: "log.segment.bytes", min: 14, max: maxInt32, applied: true,
			doc: "segment size at which a new segment is rolled"},
		{name: "segment.ms", typ: ctLong, def: "604800000", synonym: "log.roll.ms", min: 1, max: 1<<63 - 1, applied: true,
			doc: "age at which a new segment is rolled"},
		{name: "max.message.bytes", typ: ctInt, def: "1048588", synonym: "message.max.bytes", min: 0, max: maxInt32, applied: true,
			doc: "largest record batch accepted (MESSAGE_TOO_LARGE above)"},
		{name: "message.timestamp.type", typ: ctString, def: "CreateTime", synonym: "log.message.timestamp.type", enum: []string{"CreateTime", "LogAppendTime"}, applied: true,
			doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append"},
		{name: "index.interval.bytes", typ: ctInt, def: "4096", synonym: "log.index.interval.bytes", min: 0, max: maxInt32, applied: true,
			doc: "bytes between offset index entries"},
		{name: "min.insync.replicas", typ: ctInt, def: "1", synonym: "min.insync.replicas", min: 1, max: maxInt32, applied: true,
			doc: "acks=all produces fail with NOT_ENOUGH_REPLICAS when this is above 1: the single node is the whole ISR"},
		{name: "compression.type", typ: ctString, def: "producer", synonym: "compression.type", enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
			doc: "batches are stored as the producer compressed them"},
		{name: "delete.retention.ms", typ: ctLong, def: "86400000", synonym: "log.cleaner.delete.retention.ms", min: 0, max: 1<<63 - 1, applied: true,
			doc: "how long a tombstone stays after the cleaner first passed it"},
		{name: "file.delete.delay.ms", typ: ctLong, def: "60000", synonym: "log.segment.delete.delay.ms", min: 0, max: 1<<63 - 1,
			doc: "deleted segments are removed once their last reader is done"},
		{name: "flush.messages", typ: ctLong, def: "9223372036854775807", synonym: "log.flush.interval.messages", min: 1, max: 1<<63 - 1,
			doc: "the broker's fsync policy decides (an acks=all produce is answered after its fsync)"},
		{name: "flush.ms", typ: ctLong, def: "9223372036854775807", synonym: "log.flush.interval.ms", min: 0, max: 1<<63 - 1,
			doc: "the broker's fsync policy decides (an acks=all produce is answered after its fsync)"},
		{name: "max.compaction.lag.ms", typ: ctLong, def: "9223372036854775807", synonym: "log.cleaner.max.compaction.lag.ms", min: 1, max: 1<<63 - 1, applied: true,
			doc: "a record stays uncompacted at most this long"},
		{name: "min.compaction.lag.ms", typ: ctLong, def: "0", synonym: "log.cleaner.min.compaction.lag.ms", min: 0, max: 1<<63 - 1, applied: true,
			doc: "a record stays uncompacted at least this long"},
		{name: "min.cleanable.dirty.ratio", typ: ctDouble, def: "0.5", synonym: "log.cleaner.min.cleanable.ratio", applied: true,
			doc: "share of uncompacted bytes that triggers the cleaner"},
		{name: "message.timestamp.before.max.ms", typ: ctLong, def: "9223372036854775807", synonym: "log.message.timestamp.before.max.ms", min: 0, max: 1<<63 - 1, applied: true,
			doc: "with CreateTime, a record stamped further than this before the broker's clock fails the produce with INVALID_TIMESTAMP"},
		{name: "message.timestamp.after.max.ms", typ: ctLong, def: "3600000", synonym: "log.message.timestamp.after.max.ms", min: 0, max: 1<<63 - 1, applied: true,
			doc: "with CreateTime, a record stamped further than this after the broker's clock fails the produce with INVALID_TIMESTAMP"},
		{name: "message.timestamp.difference.max.ms", typ: ctLong, def: "9223372036854775807", synonym: "log.message.timestamp.difference.max.ms", min: 0, max: 1<<63 - 1,
			doc: "removed in Kafka 4.0; message.timestamp.before.max.ms and message.timestamp.after.max.ms apply"},
		{name: "preallocate", typ: ctBool, def: "false", synonym: "log.preallocate",
			doc: "the log reserves space for the active segment in bounded steps itself, whatever this says"},
		{name: "segment.index.bytes", typ: ctInt, def: "10485760", synonym: "log.index.size.max.bytes", min: 4, max: maxInt32,
			doc: "index files grow as needed"},
		{name: "segment.jitter.ms", typ: ctLong, def: "0", synonym: "log.roll.jitter.ms", min: 0, max: 1<<63 - 1,
			doc: "segments roll at segment.ms exactly"},
		{name: "unclean.leader.election.enable", typ: ctBool, def: "false", synonym: "unclean.leader.election.enable",
			doc: "a single node has no other replica to elect"},
		{name: "message.downconversion.enable", typ: ctBool, def: "true", synonym: "log.message.downconversion.enable",
			doc: "only RecordBatch v2 clients (Produce v3+, Fetch v4+) are served"},
		{name: "local.retention.ms", typ: ctLong, def: "-2", synonym: "log.local.retention.ms", min: -2, max: 1<<63 - 1,
			doc: "no tiered storage"},
		{name: "local.retention.bytes", typ: ctLong, def: "-2", synonym: "log.local.retention.bytes", min: -2, max: 1<<63 - 1,
			doc: "no tiered storage"},
		{name: "remote.storage.enable", typ: ctBool, def: "false",
			doc: "no tiered storage"},
		{name: "leader.replication.throttled.replicas", typ: ctList, def: "",
			doc: "a single node does not replicate"},
		{name: "follower.replication.throttled.replicas", typ: ctList, def: "",
			doc: "a single node does not replicate"},
	}
	m := make(map[string]topicConfigDef, len(defs))
	for _, d := range defs {
		m[d.name] = d
	}
	return m
}()

// notEnforced starts the DescribeConfigs documentation of every config
// weir accepts and stores but does not act on; the reason follows.
const notEnforced = "NOT ENFORCED by weir (accepted and stored only): "

// documentation is the DescribeConfigs documentation of a config.
func (d topicConfigDef) documentation() string {
	if !d.applied {
		return notEnforced + d.doc
	}
	return d.doc
}

// sortedTopicConfigNames lists topicConfigDefs in name order (describe output).
var sortedTopicConfigNames = func() []string {
	names := make([]string, 0, len(topicConfigDefs))
	for n := range topicConfigDefs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}()

// configError is an INVALID_CONFIG with its message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// validateTopicConfig checks one name=value; the value is normalised
// (list items trimmed).
func validateTopicConfig(name string, value *string) (string, error) {
	d, ok := topicConfigDefs[name]
	if !ok {
		return "", &configError{fmt.Sprintf("unknown topic config name: %s", name)}
	}
	if value == nil {
		return "", &configError{fmt.Sprintf("null value not supported for topic config %s", name)}
	}
	v := strings.TrimSpace(*value)
	bad := func(why string) (string, error) {
		return "", &configError{fmt.Sprintf("invalid value %q for configuration %s: %s", *value, name, why)}
	}
	switch d.typ {
	case ctBool:
		switch strings.ToLower(v) {
		case "true", "false":
			return strings.ToLower(v), nil
		}
		return bad("expected a boolean")
	case ctInt, ctLong:
		bits := 64
		if d.typ == ctInt {
			bits = 32
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad("expected a number")
		}
		if n < d.min || n > d.max {
			return bad(fmt.Sprintf("value must be in [%d, %d]", d.min, d.max))
		}
		return strconv.FormatInt(n, 10), nil
	case ctDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return bad("expected a number in [0, 1]")
		}
		return v, nil
	case ctList:
		if v == "" {
			if len(d.enum) > 0 {
				return bad("empty list")
			}
			return "", nil
		}
		items := strings.Split(v, ",")
		for i, it := range items {
			it = strings.TrimSpace(it)
			if len(d.enum) > 0 && !slices.Contains(d.enum, it) {
				return bad(fmt.Sprintf("allowed values are %s", strings.Join(d.enum, ", ")))
			}
			items[i] = it
		}
		return strings.Join(items, ","), nil
	default:
		if len(d.enum) > 0 && !slices.Contains(d.enum, v) {
			return bad(fmt.Sprintf("allowed values are %s", strings.Join(d.enum, ", ")))
		}
		return v, nil
	}
}

// configValue returns the effective value of name for the overrides.
func configValue(overrides map[string]string, name string) (string, bool) {
	if v, ok := overrides[name]; ok {
		return v, true
	}
	return topicConfigDefs[name].def, false
}

// logConfig converts a topic's config overrides into the log's Config.
// Values were validated when set.
func logConfig(overrides map[string]string) wlog.Config {
	num := func(name string) int64 {
		v, _ := configValue(overrides, name)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	var c wlog.Config
	c.SegmentBytes = num("segment.bytes")
	c.SegmentMs = num("segment.ms")
	c.RetentionMs = num("retention.ms")
	c.RetentionBytes = num("retention.bytes")
	c.MaxMessageBytes = int32(num("max.message.bytes"))
	c.IndexIntervalBytes = int32(num("index.interval.bytes"))
	// The log's zero means its default, negative means 0.
	if c.TimestampBeforeMaxMs = num("message.timestamp.before.max.ms"); c.TimestampBeforeMaxMs == 0 {
		c.TimestampBeforeMaxMs = -1
	}
	if c.TimestampAfterMaxMs = num("message.timestamp.after.max.ms"); c.TimestampAfterMaxMs == 0 {
		c.TimestampAfterMaxMs = -1
	}
	if v, _ := configValue(overrides, "message.timestamp.type"); v == "LogAppendTime" {
		c.TimestampType = wlog.LogAppendTime
	} else {
		c.TimestampType = wlog.CreateTime
	}
	// Compaction (wlog's zero means default, negative means 0).
	c.MinCompactionLagMs = num("min.compaction.lag.ms")
	c.MaxCompactionLagMs = num("max.compaction.lag.ms")
	if c.DeleteRetentionMs = num("delete.retention.ms"); c.DeleteRetentionMs == 0 {
		c.DeleteRetentionMs = -1
	}
	if v, _ := configValue(overrides, "min.cleanable.dirty.ratio"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if c.MinCleanableDirtyRatio = f; f == 0 {
				c.MinCleanableDirtyRatio = -1
			}
		}
	}
	policy, _ := configValue(overrides, "cleanup.policy")
	for _, p := range strings.Split(policy, ",") {
		switch p {
		case "compact":
			c.Compact = true
		case "delete":
			c.Delete = true
		}
	}
	return c
}

// describeTopicConfigs builds the DescribeConfigs entries of a topic. names
// nil means all. Sources and synonyms follow Kafka: an override is
// DYNAMIC_TOPIC_CONFIG with synonyms [override, broker default]; otherwise
// DEFAULT_CONFIG with the broker default as its only synonym.
func describeTopicConfigs(overrides map[string]string, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	if names == nil {
		names = sortedTopicConfigNames
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(names))
	for _, name := range names {
		d, ok := topicConfigDefs[name]
		if !ok {
			continue // Kafka omits unknown names
		}
		v, overridden := configValue(overrides, name)
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = name
		rc.Value = kmsg.StringPtr(v)
		rc.ReadOnly = d.readOnly
		rc.ConfigType = kmsg.ConfigType(d.typ)
		rc.Source = kmsg.ConfigSourceDefaultConfig
		rc.IsDefault = !overridden
		if overridden {
			rc.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		if docs {
			rc.Documentation = kmsg.StringPtr(d.documentation())
		}
		if synonyms {
			if overridden {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = name, kmsg.StringPtr(v), kmsg.ConfigSourceDynamicTopicConfig
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, s)
			}
			if d.synonym != "" {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = d.synonym, kmsg.StringPtr(d.def), kmsg.ConfigSourceDefaultConfig
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, s)
			}
		}
		out = append(out, rc)
	}
	return out
}

// minInsyncReplicas is the topic's min.insync.replicas (validated when set).
func (t *topic) minInsyncReplicas() int64 {
	v, ok := t.configs["min.insync.replicas"]
	if !ok {
		return 1
	}
	n, _ := strconv.ParseInt(v, 10, 32)
	return n
}

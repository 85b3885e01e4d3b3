package share

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Broker-level share group settings, Kafka 4.1's defaults (group.share.*).
const (
	DefaultHeartbeatInterval  = 5 * time.Second  // group.share.heartbeat.interval.ms
	DefaultSessionTimeout     = 45 * time.Second // group.share.session.timeout.ms
	DefaultRecordLockDuration = 30 * time.Second // group.share.record.lock.duration.ms
	DefaultDeliveryCountLimit = 5                // group.share.delivery.count.limit
	DefaultMaxRecordLocks     = 2000             // group.share.partition.max.record.locks
	DefaultMaxSize            = 200              // group.share.max.size (members per group)

	minRecordLockDuration = time.Second      // group.share.min.record.lock.duration.ms
	maxRecordLockDuration = time.Hour        // group.share.max.record.lock.duration.ms
	minSessionTimeout     = 45 * time.Second // group.share.min.session.timeout.ms
	maxSessionTimeout     = 60 * time.Second // group.share.max.session.timeout.ms
	minHeartbeatInterval  = 5 * time.Second  // group.share.min.heartbeat.interval.ms
	maxHeartbeatInterval  = 15 * time.Second // group.share.max.heartbeat.interval.ms
	minDeliveryCountLimit = 2                // group.share.min.delivery.count.limit
	maxDeliveryCountLimit = 10               // group.share.max.delivery.count.limit
)

// Group-level configs (IncrementalAlterConfigs on a GROUP resource), the
// share.* ones Kafka defines. A group without an override uses the broker
// setting.
const (
	ConfAutoOffsetReset    = "share.auto.offset.reset"
	ConfRecordLockDuration = "share.record.lock.duration.ms"
	ConfSessionTimeout     = "share.session.timeout.ms"
	ConfHeartbeatInterval  = "share.heartbeat.interval.ms"
	ConfIsolationLevel     = "share.isolation.level"
	ConfDeliveryCountLimit = "share.delivery.count.limit"
)

// GroupConfigDoc describes one group config for DescribeConfigs.
type GroupConfigDoc struct {
	Name, Doc string
	Int       bool // INT (else STRING)
}

// GroupConfigDocs lists the group configs weir serves, sorted by name.
func GroupConfigDocs() []GroupConfigDoc {
	out := []GroupConfigDoc{
		{ConfAutoOffsetReset, "Where a share-partition starts when the group first consumes it: latest (the log end) or earliest (the log start).", false},
		{ConfRecordLockDuration, "How long a member holds the records it acquired before they are released for redelivery (ms).", true},
		{ConfSessionTimeout, "How long a member may go without a heartbeat before it is removed and its records released (ms).", true},
		{ConfHeartbeatInterval, "How often members heartbeat (ms).", true},
		{ConfIsolationLevel, "read_uncommitted (the default): records of open and aborted transactions are delivered; read_committed: only committed records, up to the last stable offset (aborted ones are archived).", false},
		{ConfDeliveryCountLimit, "How many times a record is delivered before it is archived instead of redelivered.", true},
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidateGroupConfig checks one group config value; the error names the
// accepted values.
func ValidateGroupConfig(name, value string) error {
	intIn := func(lo, hi int64) error {
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%s must be an integer in [%d, %d], got %q", name, lo, hi, value)
		}
		return nil
	}
	switch name {
	case ConfAutoOffsetReset:
		if value != "latest" && value != "earliest" {
			return fmt.Errorf("%s must be latest or earliest, got %q (by_duration is not supported by weir)", name, value)
		}
		return nil
	case ConfRecordLockDuration:
		return intIn(minRecordLockDuration.Milliseconds(), maxRecordLockDuration.Milliseconds())
	case ConfSessionTimeout:
		return intIn(minSessionTimeout.Milliseconds(), maxSessionTimeout.Milliseconds())
	case ConfHeartbeatInterval:
		return intIn(minHeartbeatInterval.Milliseconds(), maxHeartbeatInterval.Milliseconds())
	case ConfDeliveryCountLimit:
		return intIn(minDeliveryCountLimit, maxDeliveryCountLimit)
	case ConfIsolationLevel:
		if value != "read_uncommitted" && value != "read_committed" {
			return fmt.Errorf("%s must be read_uncommitted or read_committed, got %q", name, value)
		}
		return nil
	}
	return fmt.Errorf("unknown group config %s (weir serves the share.* group configs)", name)
}

// groupSettings are a group's effective settings: its overrides over the
// broker's.
type groupSettings struct {
	earliest       bool
	lockDuration   time.Duration
	sessionTimeout time.Duration
	heartbeat      time.Duration
	limit          int16
	committed      bool // share.isolation.level=read_committed
}

func (c *Coordinator) settings(group string) groupSettings {
	s := groupSettings{
		lockDuration:   c.opts.RecordLockDuration,
		sessionTimeout: c.opts.SessionTimeout,
		heartbeat:      c.opts.HeartbeatInterval,
		limit:          c.opts.DeliveryCountLimit,
	}
	conf := c.confs[group]
	ms := func(name string, d *time.Duration) {
		if v, ok := conf[name]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				*d = time.Duration(n) * time.Millisecond
			}
		}
	}
	s.earliest = conf[ConfAutoOffsetReset] == "earliest"
	s.committed = conf[ConfIsolationLevel] == "read_committed"
	ms(ConfRecordLockDuration, &s.lockDuration)
	ms(ConfSessionTimeout, &s.sessionTimeout)
	ms(ConfHeartbeatInterval, &s.heartbeat)
	if v, ok := conf[ConfDeliveryCountLimit]; ok {
		if n, err := strconv.ParseInt(v, 10, 16); err == nil {
			s.limit = int16(n)
		}
	}
	return s
}

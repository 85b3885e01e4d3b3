package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBadSyncRecord is returned (wrapped, with the record's position) when a
// record of a mirror's progress or offset-syncs topic cannot be decoded:
// something other than the mirror wrote to the topic, or a newer version did.
var ErrBadSyncRecord = errors.New("mirror: undecodable offset-sync record")

// syncVersion is the version of the offset-sync record format. Part of the
// stored format: a reader refuses any other version.
const syncVersion = 1

// offsetSync is the value of a record of the progress and offset-syncs
// topics (JSON, so that `weir consume` shows it readably). Its invariant,
// on which restart and offset translation rely:
//
//	every data record of Topic/Partition below Source has been copied to
//	Target/Partition; and from offset TargetOffset on, the committed data
//	records of Target/Partition are copies, in order, of the source's data
//	records from Source on (until the next sync of the partition).
//
// Source counts control records (transaction markers) as read, so a
// caught-up mirror's Source is the source partition's last stable offset.
type offsetSync struct {
	Version      int    `json:"v"`
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Target       string `json:"target"`
	Source       int64  `json:"source_offset"`
	TargetOffset int64  `json:"target_offset"`
	// WrittenMs is when the sync was written (ms since the epoch).
	WrittenMs int64 `json:"written_ms"`
	// LastTimestampMs is the source timestamp of the last data record
	// copied (ms since the epoch), -1 if none yet: the time the target has
	// reached in this partition.
	LastTimestampMs int64 `json:"last_timestamp_ms"`
	// Restart marks the sync a mirror writes for each partition when it
	// starts, before copying.
	Restart bool `json:"restart,omitempty"`
}

// syncKey is the record key of a sync: "<topic>/<partition>" (Kafka topic
// names cannot contain '/'). The progress topic is compacted on it.
func syncKey(topic string, partition int32) []byte {
	return []byte(topic + "/" + strconv.Itoa(int(partition)))
}

func (s offsetSync) record(topic string) *kgo.Record {
	v, _ := json.Marshal(s) // a struct of strings and integers always marshals
	return &kgo.Record{Topic: topic, Partition: 0, Key: syncKey(s.Topic, s.Partition), Value: v,
		Timestamp: time.UnixMilli(s.WrittenMs)}
}

// decodeSync decodes and validates the value of a sync record.
func decodeSync(key, value []byte) (offsetSync, error) {
	var s offsetSync
	if err := json.Unmarshal(value, &s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrBadSyncRecord, err)
	}
	switch {
	case s.Version != syncVersion:
		return s, fmt.Errorf("%w: version %d, want %d", ErrBadSyncRecord, s.Version, syncVersion)
	case s.Topic == "" || s.Target == "" || strings.Contains(s.Topic, "/"):
		return s, fmt.Errorf("%w: topic %q, target %q", ErrBadSyncRecord, s.Topic, s.Target)
	case s.Partition < 0 || s.Source < 0 || s.TargetOffset < 0:
		return s, fmt.Errorf("%w: negative partition or offset (%d, %d, %d)", ErrBadSyncRecord, s.Partition, s.Source, s.TargetOffset)
	case key != nil && string(key) != string(syncKey(s.Topic, s.Partition)):
		return s, fmt.Errorf("%w: key %q does not name %s/%d", ErrBadSyncRecord, key, s.Topic, s.Partition)
	}
	return s, nil
}

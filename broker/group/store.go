package group

import "fmt"

// OffsetsLog is the part of the offsets partition's log the coordinator
// uses. *wlog.Log (broker/log) satisfies it.
type OffsetsLog interface {
	HighWatermark() int64
	LogStartOffset() int64
}

// newLogStore adapts the offsets log.
func newLogStore(l OffsetsLog) (store, error) {
	if s, ok := l.(store); ok {
		return s, nil
	}
	return nil, fmt.Errorf("group: unsupported offsets log %T", l)
}

package group

import (
	wlog "github.com/weirhq/weir/broker/log"
)

// store is the coordinator's view of the offsets partition.
type store interface {
	// append writes one or more concatenated batches and returns the
	// offset given to the first record; durable returns after fsync.
	append(batches []byte, durable bool) (base int64, err error)
	// read returns whole batches from offset up to upTo.
	read(offset int64, maxBytes int, upTo int64) (data []byte, release func(), err error)
	highWatermark() int64
	logStartOffset() int64
}

// OffsetsLog is the part of the offsets partition's log the coordinator
// uses; *wlog.Log satisfies it. The coordinator appends from one goroutine
// and reads only while replaying in NewCoordinator.
type OffsetsLog interface {
	Append(batches []byte, durable bool) (wlog.AppendResult, error)
	Read(offset int64, maxBytes int, upTo int64) (wlog.ReadResult, error)
	HighWatermark() int64
	LogStartOffset() int64
}

var _ OffsetsLog = (*wlog.Log)(nil)

// newLogStore adapts the offsets log. Tests may pass a log that already
// implements store.
func newLogStore(l OffsetsLog) (store, error) {
	if s, ok := l.(store); ok {
		return s, nil
	}
	return logStore{l}, nil
}

type logStore struct{ l OffsetsLog }

func (s logStore) append(b []byte, durable bool) (int64, error) {
	r, err := s.l.Append(b, durable)
	if err != nil {
		return 0, err
	}
	return r.BaseOffset, nil
}

func (s logStore) read(offset int64, maxBytes int, upTo int64) ([]byte, func(), error) {
	r, err := s.l.Read(offset, maxBytes, upTo)
	if err != nil {
		return nil, func() {}, err
	}
	rel := r.Release
	if rel == nil {
		rel = func() {}
	}
	return r.Data, rel, nil
}

func (s logStore) highWatermark() int64  { return s.l.HighWatermark() }
func (s logStore) logStartOffset() int64 { return s.l.LogStartOffset() }

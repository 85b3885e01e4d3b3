package broker

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Fetch sessions (KIP-227). A consumer that fetches the same partitions
// over and over sends only what changed (incremental fetch); the broker
// remembers the rest and answers only partitions with news.
//
// Request (SessionID, SessionEpoch):
//
//	(0, -1)  full fetch, no session
//	(0,  0)  full fetch, open a session; its ID is returned, next epoch 1
//	(X,  0)  close session X, then as (0, 0)
//	(X, -1)  close session X, full fetch without session
//	(X,  N)  incremental: X must exist (else FETCH_SESSION_ID_NOT_FOUND) and
//	         N must be its next epoch (else INVALID_FETCH_SESSION_EPOCH);
//	         listed partitions are added or updated, forgotten ones removed
//
// An incremental response lists a partition only if it has records, an
// error, or a high watermark / log start offset different from the last
// one sent for it. At most max sessions exist; opening one more evicts the
// least recently used.

type sessionKey struct {
	id        [16]byte // topic ID (v13+), else zero
	topic     string   // topic name (before v13), else ""
	partition int32
}

type sessionPart struct {
	fetchOffset int64
	maxBytes    int32
	// last values sent, for incremental responses; -1 until first sent
	sentHW, sentStart, sentLSO int64
}

type fetchSession struct {
	// mu guards epoch-independent state below: a client that gave up on a
	// long poll may already be using the next epoch while it runs.
	mu    sync.Mutex
	id    int32
	epoch int32 // next expected epoch
	used  time.Time
	parts map[sessionKey]*sessionPart
	// order is the order partitions are read in: the request's, except
	// that partitions that returned records move to the end (fairness
	// under the response size limit).
	order []sessionKey
}

// fetchSessions is goroutine-safe. A session is used by one fetch at a
// time: the epoch check fails a concurrent second user.
type fetchSessions struct {
	mu     sync.Mutex
	max    int
	nextID int32
	byID   map[int32]*fetchSession
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, byID: map[int32]*fetchSession{}}
}

// open creates a session, evicting the least recently used if full. It
// returns nil if max is 0.
func (fs *fetchSessions) open(now time.Time) *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.max <= 0 {
		return nil
	}
	if len(fs.byID) >= fs.max {
		var lru *fetchSession
		for _, s := range fs.byID {
			if lru == nil || s.used.Before(lru.used) {
				lru = s
			}
		}
		delete(fs.byID, lru.id)
	}
	for {
		fs.nextID++
		if fs.nextID <= 0 {
			fs.nextID = 1
		}
		if _, taken := fs.byID[fs.nextID]; !taken {
			break
		}
	}
	s := &fetchSession{id: fs.nextID, epoch: 1, used: now, parts: map[sessionKey]*sessionPart{}}
	fs.byID[s.id] = s
	return s
}

func (fs *fetchSessions) close(id int32) {
	fs.mu.Lock()
	delete(fs.byID, id)
	fs.mu.Unlock()
}

// next validates an incremental request and advances the session's epoch.
func (fs *fetchSessions) next(id, epoch int32, now time.Time) (*fetchSession, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s, ok := fs.byID[id]
	if !ok {
		return nil, kerr.FetchSessionIDNotFound
	}
	if s.epoch != epoch {
		return nil, kerr.InvalidFetchSessionEpoch
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	s.used = now
	return s, nil
}

// count is the number of open sessions.
func (fs *fetchSessions) count() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.byID)
}

// upsert and forget are called with s.mu held.

func (s *fetchSession) upsert(k sessionKey, fetchOffset int64, maxBytes int32) {
	if p, ok := s.parts[k]; ok {
		p.fetchOffset, p.maxBytes = fetchOffset, maxBytes
		return
	}
	s.parts[k] = &sessionPart{fetchOffset: fetchOffset, maxBytes: maxBytes, sentHW: -1, sentStart: -1, sentLSO: -1}
	s.order = append(s.order, k)
}

// moveToEnd puts k last in the session's order (after a fetch returned
// records for it), so partitions behind it are read first next time.
func (s *fetchSession) moveToEnd(k sessionKey) {
	for i, o := range s.order {
		if o == k {
			s.order = append(append(s.order[:i], s.order[i+1:]...), k)
			return
		}
	}
}

func (s *fetchSession) forget(k sessionKey) {
	if _, ok := s.parts[k]; !ok {
		return
	}
	delete(s.parts, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

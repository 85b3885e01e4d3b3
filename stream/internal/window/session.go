package window

import (
	"fmt"
	"time"
)

// Sessions are session windows with an inactivity gap (Kafka Streams'
// SessionWindows): a session [Start, End] runs from its first to its last
// record, and a record at t joins every session with Start - Gap <= t <=
// End + Gap (gap inclusive, as Kafka). A key's sessions are therefore always
// more than Gap apart, and a record that lands within Gap of two of them
// bridges them into one.
type Sessions struct {
	Gap time.Duration // > 0, whole milliseconds
}

// Validate reports a configuration the sessions cannot use.
func (s Sessions) Validate() error {
	if s.Gap <= 0 || !wholeMs(s.Gap) {
		return fmt.Errorf("%w: session gap %v is not a positive whole number of milliseconds", ErrConfig, s.Gap)
	}
	return nil
}

// SearchFrom returns the smallest session End that a record at ts can
// join: the key's window scan (timekey.KeyWindows, in End order) starts
// there and may stop at the first session starting after SearchTo(ts).
func (s Sessions) SearchFrom(ts int64) int64 { return satAdd(ts, -s.Gap.Milliseconds()) }

// SearchTo returns the largest session Start a record at ts can join.
func (s Sessions) SearchTo(ts int64) int64 { return satAdd(ts, s.Gap.Milliseconds()) }

// SessionMerge says what a record does to its key's sessions.
type SessionMerge struct {
	// Session is the session holding the record afterwards.
	Session Window
	// Absorbed lists (as indexes into the sessions given to Merge, in their
	// order) the existing sessions the record joined. Each one's state is
	// combined into Session's (for an aggregate, with the user's merge
	// function; Count and Reduce merge by themselves) and deleted, unless
	// Unchanged. Empty: the record starts a new session [ts, ts].
	Absorbed []int
	// Unchanged is true when the record joined exactly one session without
	// extending it: Session is that session, nothing to delete or create.
	Unchanged bool
}

// Merge returns what a record at ts does to a key's existing sessions
// (sorted by End, not overlapping: as the window store keeps them; sessions
// that ts cannot join may be included and are skipped). It appends the
// absorbed indexes to absorbed[:0], which may be nil. An input that breaks
// the ordering is an error.
func (s Sessions) Merge(ts int64, existing []Window, absorbed []int) (SessionMerge, error) {
	gap := s.Gap.Milliseconds()
	m := SessionMerge{Session: Window{Start: ts, End: ts}, Absorbed: absorbed[:0]}
	for i, w := range existing {
		if w.End < w.Start || (i > 0 && w.Start <= existing[i-1].End) {
			return SessionMerge{}, fmt.Errorf("window: sessions not sorted and disjoint at %d: %v", i, existing)
		}
		if satAdd(w.End, gap) < ts || satAdd(w.Start, -gap) > ts {
			continue
		}
		m.Absorbed = append(m.Absorbed, i)
		m.Session.Start = min(m.Session.Start, w.Start)
		m.Session.End = max(m.Session.End, w.End)
	}
	m.Unchanged = len(m.Absorbed) == 1 && existing[m.Absorbed[0]] == m.Session
	return m, nil
}

// CloseAt returns the smallest watermark at which session w is closed,
// given allowed lateness: End + Gap + 1 + lateness (saturated). Before it a
// record may still extend the session.
func (s Sessions) CloseAt(w Window, lateness time.Duration) int64 {
	return satAdd(satAdd(satAdd(w.End, s.Gap.Milliseconds()), 1), lateness.Milliseconds())
}

// Late reports whether a record at ts is late for sliding or session
// windows at watermark wm:
// wm >= ts + 1 + lateness. A record that is not late never joins a closed
// session (it is within Gap of none).
func Late(ts, wm int64, lateness time.Duration) bool {
	return wm >= satAdd(satAdd(ts, 1), lateness.Milliseconds())
}

package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/watermark"
)

// Timers of a Process operator, in its task's store "<name>-timers":
//
//	timer: domain | fire time | key | name -> 0x01   (timekey.TimerKey; FiringBy is one scan)
//	index: 'x' | domain | key (escaped) | name -> fire time (8 bytes, big endian)
//
// The index finds a timer by (domain, key, name), so a timer can be moved or
// deleted without its time; both entries are written and deleted together.
// Values are never empty (an empty changelog value could read back as a
// tombstone).
//
// The database scan does not see the writes of the task's open state.Txn
// (one round; under ExactlyOnce every round of the open transaction).
// Hence:
//   - a timer found by the scan is fired only if the Txn still has it (it
//     may have been deleted, fired or moved in the open Txn);
//   - timers set in the open Txn are remembered in pending (by domain)
//     until the Txn ends (task.txnGen moves): then they are in the database,
//     or were discarded with it;
//   - next[d] is a lower bound of the next fire time of domain d: a scan
//     happens only once the watermark or clock reaches it. Setting a timer
//     lowers it; a scan raises it to the first timer left. A timer the open
//     Txn deleted (fired, moved, deleted) lowers low[d], folded into next[d]
//     when the Txn ends, since an abort brings it back;
//   - floor[d] is a lower bound of the fire time of every timer of domain d
//     the database holds that has not fired: a scan starts there, not at
//     the start of the domain, so it does not wade through the tombstones
//     of the timers fired before (until a compaction drops them, Pebble
//     would step over each one). A due timer set in the open Txn fires from
//     pending; one still pending when the Txn ends, and low[d], lower it.

// timerChangelogPhase orders a flush of the timer store's collapsed
// changelog (storeChangelog): new timer entries first, then the index,
// then the deletions of timer entries. Every prefix of the changelog a
// crash may leave then has each index entry's timer entry (a move or a
// delete finds the timer it removes); at worst a moved timer's old entry
// is still there, and fires once more (at-least-once), but no timer is
// lost.
func timerChangelogPhase(key []byte, deleted bool) int {
	switch {
	case len(key) > 0 && key[0] == indexPrefix:
		return 1
	case deleted:
		return 2
	}
	return 0
}

// timerValue is the value of a timer entry.
var timerValue = []byte{1}

const indexPrefix = 'x'

// timerFired is a timer being fired, undecoded.
type timerFired struct {
	domain TimerDomain
	fire   int64
	key    []byte
	name   string
}

// procTimers is the timer service of one Process instance in one task: a
// time-driven operator (timed.go).
type procTimers struct {
	c    *procCore
	st   *taskStore
	fire func(timerFired) error

	gen     uint64
	pending [2]map[string]struct{}
	next    [2]int64
	low     [2]int64
	floor   [2]int64
}

func newProcTimers(c *procCore, st *taskStore) *procTimers {
	p := &procTimers{c: c, st: st, gen: c.t.txnGen}
	for i := range p.pending {
		p.pending[i] = map[string]struct{}{}
		p.next[i] = math.MinInt64 // unknown: the first advance scans
		p.low[i] = math.MaxInt64
		p.floor[i] = math.MinInt64
	}
	return p
}

func domainIdx(d TimerDomain) int {
	if d == ProcessingTimer {
		return 1
	}
	return 0
}

func (p *procTimers) nodeID() int { return p.c.n.id }

// sync drops the memory of a Txn that ended (see the file comment).
func (p *procTimers) sync() {
	if p.gen == p.c.t.txnGen {
		return
	}
	p.gen = p.c.t.txnGen
	for i := range p.pending {
		for k := range p.pending[i] {
			if tm, err := timekey.ParseTimerKey([]byte(k)); err == nil {
				p.floor[i] = min(p.floor[i], tm.Fire)
			}
		}
		clear(p.pending[i])
		p.next[i] = min(p.next[i], p.low[i])
		p.floor[i] = min(p.floor[i], p.low[i])
		p.low[i] = math.MaxInt64
	}
}

func timerIndexKey(d TimerDomain, key []byte, name string) []byte {
	b := make([]byte, 0, 4+len(key)+len(name))
	b = append(b, indexPrefix, byte(d))
	b = timekey.AppendKey(b, key)
	return append(b, name...)
}

// set sets (or moves) timer (d, key, name) to fire at ms, in the unit being
// processed.
func (p *procTimers) set(d TimerDomain, key []byte, name string, ms int64) error {
	p.sync()
	i := domainIdx(d)
	ts := p.c.meta.Timestamp
	ik := timerIndexKey(d, key, name)
	old, found, err := p.st.get(ik)
	if err != nil {
		return err
	}
	if found {
		if len(old) != 8 {
			return &fatalError{fmt.Errorf("timer store %s: index entry of %d bytes", p.st.spec.name, len(old))}
		}
		prev := int64(binary.BigEndian.Uint64(old))
		if prev == ms {
			return nil
		}
		tk := timekey.TimerKey(nil, timekey.Timer{Domain: timekey.Domain(d), Fire: prev, Key: key, Name: []byte(name)})
		if err := p.c.delete(p.st, tk, ts); err != nil {
			return err
		}
		p.low[i] = min(p.low[i], prev)
	}
	tk := timekey.TimerKey(nil, timekey.Timer{Domain: timekey.Domain(d), Fire: ms, Key: key, Name: []byte(name)})
	if err := p.c.put(p.st, tk, timerValue, ts); err != nil {
		return err
	}
	if err := p.c.put(p.st, ik, binary.BigEndian.AppendUint64(nil, uint64(ms)), ts); err != nil {
		return err
	}
	// Remembered even if the unit fails: a pending key is checked against
	// the Txn before it fires.
	p.pending[i][string(tk)] = struct{}{}
	p.next[i] = min(p.next[i], ms)
	return nil
}

// delete deletes timer (d, key, name) if it is set.
func (p *procTimers) delete(d TimerDomain, key []byte, name string) error {
	p.sync()
	ik := timerIndexKey(d, key, name)
	old, found, err := p.st.get(ik)
	if err != nil || !found {
		return err
	}
	if len(old) != 8 {
		return &fatalError{fmt.Errorf("timer store %s: index entry of %d bytes", p.st.spec.name, len(old))}
	}
	prev := int64(binary.BigEndian.Uint64(old))
	ts := p.c.meta.Timestamp
	tk := timekey.TimerKey(nil, timekey.Timer{Domain: timekey.Domain(d), Fire: prev, Key: key, Name: []byte(name)})
	if err := p.c.delete(p.st, tk, ts); err != nil {
		return err
	}
	p.low[domainIdx(d)] = min(p.low[domainIdx(d)], prev)
	return p.c.delete(p.st, ik, ts)
}

// advance fires the event-time timers the watermark reached, then the
// processing-time timers the clock reached.
func (p *procTimers) advance(wm int64, now time.Time) error {
	p.c.wm = wm
	t := p.c.t
	if t.db == nil {
		return nil
	}
	if t.txn == nil {
		t.txn = t.db.Begin()
	}
	p.sync()
	if wm != watermark.Min {
		if err := p.fireDomain(EventTimer, wm, now); err != nil {
			return err
		}
	}
	return p.fireDomain(ProcessingTimer, now.UnixMilli(), now)
}

// scanBatch bounds the timers read from the database at once.
const scanBatch = 256

// maxRefirePasses bounds the passes over timers that callbacks set due
// again in the same round (a callback re-arming its own timer in the past
// would otherwise loop): the rest fire in the next round.
const maxRefirePasses = 64

// errStopTimerScan ends a scan early.
var errStopTimerScan = errors.New("stop scan")

// fireDomain fires, in time order, every timer of domain d due at w.
func (p *procTimers) fireDomain(d TimerDomain, w int64, now time.Time) error {
	i := domainIdx(d)
	if p.next[i] > w {
		return nil
	}
	t := p.c.t
	_, to := timekey.FiringBy(timekey.Domain(d), w)
	_, domainEnd := timekey.FiringBy(timekey.Domain(d), math.MaxInt64)
	cursor := timekey.AppendTime([]byte{byte(d)}, p.floor[i])
	dbDone := false
	// beyond: the first database keys past the due range, read by the
	// scan that reached it, for findNext.
	var beyond [][]byte
	for pass := 0; pass < maxRefirePasses; {
		var batch [][]byte
		truncated := false
		if !dbDone {
			err := t.db.Scan(p.st.spec.name, cursor, domainEnd, func(k, _ []byte, _ int64) error {
				if bytes.Compare(k, to) >= 0 {
					beyond = append(beyond, append([]byte(nil), k...))
					if len(beyond) == nextProbe {
						return errStopTimerScan
					}
					return nil
				}
				if len(batch) == scanBatch {
					truncated = true
					return errStopTimerScan
				}
				batch = append(batch, append([]byte(nil), k...))
				return nil
			})
			if err != nil && !errors.Is(err, errStopTimerScan) {
				return &fatalError{fmt.Errorf("task %s: timers %s: %w", t.id, p.st.spec.name, err)}
			}
			if truncated {
				cursor = append(slices.Clone(batch[len(batch)-1]), 0)
			} else {
				dbDone = true
			}
		} else {
			pass++
		}
		// Timers set in the open Txn that are due, up to the last
		// database key of a truncated batch (later ones fire in order
		// with the next batch).
		for k := range p.pending[i] {
			kb := []byte(k)
			if bytes.Compare(kb, to) >= 0 || (truncated && bytes.Compare(kb, cursor) >= 0) {
				continue
			}
			batch = append(batch, kb)
		}
		if len(batch) == 0 {
			if dbDone {
				break
			}
			continue
		}
		slices.SortFunc(batch, bytes.Compare)
		batch = slices.CompactFunc(batch, bytes.Equal)
		for _, k := range batch {
			delete(p.pending[i], string(k))
			if err := p.fireOne(k, now); err != nil {
				return err
			}
		}
	}
	if w < math.MaxInt64 {
		p.floor[i] = max(p.floor[i], w+1)
	}
	return p.findNext(d, beyond)
}

// fireOne fires the timer of key k if the open Txn still has it: the
// timer's deletion and its callback's effects are one unit (task.emitTimed).
func (p *procTimers) fireOne(k []byte, now time.Time) error {
	t := p.c.t
	if _, found, err := p.st.get(k); err != nil || !found {
		return err
	}
	tm, err := timekey.ParseTimerKey(k)
	if err != nil {
		return &fatalError{fmt.Errorf("task %s: timers %s: %w", t.id, p.st.spec.name, err)}
	}
	d := TimerDomain(tm.Domain)
	ts := time.UnixMilli(tm.Fire)
	if d == ProcessingTimer {
		ts = now
		if t.streamTime != math.MinInt64 {
			ts = time.UnixMilli(t.streamTime)
		}
	}
	name := string(tm.Name)
	ik := timerIndexKey(d, tm.Key, name)
	p.low[domainIdx(d)] = min(p.low[domainIdx(d)], tm.Fire)
	ran := false
	err = t.emitTimed(func() error {
		p.c.enterRecord(ts, nil, Origin{})
		if err := p.c.delete(p.st, k, ts); err != nil {
			return err
		}
		if err := p.c.delete(p.st, ik, ts); err != nil {
			return err
		}
		if err := p.fire(timerFired{domain: d, fire: tm.Fire, key: tm.Key, name: name}); err != nil {
			return failedIn(p.c.n, err)
		}
		ran = true
		return nil
	}, p.c.timerOrigin(tm.Key, name))
	if err != nil || ran {
		return err
	}
	// The callback failed and went to the dead-letter topic; its unit,
	// the timer's deletion with it, was dropped: delete the timer alone
	// so it does not fire again.
	return t.emitTimed(func() error {
		p.c.enterRecord(ts, nil, Origin{})
		if err := p.c.delete(p.st, k, ts); err != nil {
			return err
		}
		return p.c.delete(p.st, ik, ts)
	}, p.c.timerOrigin(tm.Key, name))
}

// nextProbe bounds the keys past the due range a scan reads for findNext.
const nextProbe = 16

// findNext sets next[d] to a lower bound of the first timer of domain d
// after the range just fired: the first of beyond (the database's first
// keys past that range) the open Txn still has — or the last of them, a
// lower bound of the rest — and the pending ones.
func (p *procTimers) findNext(d TimerDomain, beyond [][]byte) error {
	i := domainIdx(d)
	next := int64(math.MaxInt64)
	for k := range p.pending[i] {
		if tm, err := timekey.ParseTimerKey([]byte(k)); err == nil && tm.Fire < next {
			next = tm.Fire
		}
	}
	t := p.c.t
	for j, k := range beyond {
		tm, err := timekey.ParseTimerKey(k)
		if err != nil {
			return &fatalError{fmt.Errorf("task %s: timers %s: %w", t.id, p.st.spec.name, err)}
		}
		if _, found, err := p.st.get(k); err != nil {
			return err
		} else if found || j == len(beyond)-1 {
			next = min(next, tm.Fire)
			break
		}
	}
	p.next[i] = next
	return nil
}

package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
	"github.com/weirhq/weir/stream/internal/window"
)

// A burst of window closes: a watermark that jumps (an idle input released,
// a record far ahead, a bounded run's end of time) may pass many windows at
// once. A windowed operator closes at most WindowClosesPerRound of them per
// round; the rest wait for the next rounds, which the loop runs at once
// (no poll wait) while an operator is behind, and each of which under
// ExactlyOnce ends its transaction: a transaction holds at most that many
// closes (results, deletions, changelog records) per operator, whatever the
// jump.
//
// How (window_agg.go, closeIndex): a close scan takes at most the budget of
// index entries in index order (end, key, start) — the order the unbounded
// scan closes them in — and remembers the last one it took (resume: every
// entry up to it is handled; scanned is its end - 1). The next round's scan
// starts just after it. resume is part of the scan's position: rolled back
// with it when a transaction aborts (committedResume), and persisted in the
// store's mark while a burst is behind (the mark's 8 bytes of watermark,
// then the cursor key), because the mark alone says "every window that
// closes by this watermark was closed", which a pending close makes untrue:
// a restore (whose derived close index may bring back the entries of closed
// windows, window_changelog.go) deletes unread the entries up to the
// cursor, and closes the ones after it (closedBefore). Such a deletion that
// writes nothing else takes nothing from the round's budget
// (freeLeftover), and a mark written while the scan is still among them
// keeps the loaded cursor (burstCursor): the cursor never moves back. The
// mark and its cursor are one store key, so no prefix of the changelog
// separates them.
//
// The row form of the pane layout (window_pane_row.go) keeps one index
// entry per key, its next window, and a row's close closes the key's
// windows up to the scan's bound and moves the row's next, so its entry,
// to the first one left, past the bound, so past the cursor too: a later
// round's scan takes it, no window is skipped or closed twice (an entry
// the database still holds at the row's former next is stale: skipped). The budget counts index
// entries there too (an entry closes a few of its key's windows: about
// size/advance for keys with records in one window's span, so a final
// jump costs one row close per key). Those closes pass the cursor, so in
// a burst (a scan that resumes or stops at its budget) a row close logs
// the row it writes back (closeRow), which outside bursts it does not: a
// restored row then holds a closed window only if the window is at or
// before the mark's cursor, which rowClosedBefore drops unemitted.
//
// Lateness while closes are pending: the watermark decides (as Flink's
// window operator and Kafka Streams' stream time do): a window whose close
// time the operator's watermark passed is closed for every record, whether
// or not the bound let its close run yet; a record reaching only such
// windows is late and goes to the late policy. The window's final result,
// when its close runs, holds exactly the records that were on time.
//
// A record that would write state a pending window reads at its close (a
// pane of the pane layout shared with later, open windows; a window
// LateUpdates updates as retained) first closes that window itself, in the
// record's all-or-nothing unit (closeTouched): the window's final result is
// then what the watermark closed, emitted just before the record's own
// effects instead of at its turn in the burst. In pane layout it closes
// the key's earlier pending windows with it, in end order (paneTouched;
// in row form one row close takes every window of the row the watermark
// passed: rowCloseTouched), since a close deletes the panes only it and
// earlier windows still hold.
//
// Queries and App.Describe: a window whose close is pending is still in the
// store, with the value its close will emit. Queries hide it (its end plus
// the close delta, plus Retain, is at or below the store's watermark mark):
// they show open (and retained) windows, as without a bound. Describe states
// the bound.
//
// A bounded run (RunBounded, the Driver's EndOfInput) finishes a
// sub-topology only once no operator of it is behind: every window closes
// before it returns, over as many rounds as the bound needs.

// defaultCloseBurst is how many window closes an operator does per round
// unless WindowClosesPerRound says otherwise: 64 of the close scan's
// database chunks. A steady stream's window end closes up to one window per
// key at once (BenchmarkWindowRatio: 33k keys per task); a bound below that
// would split every window end into rounds and cost throughput (the row
// form then logs the rows it writes back), so the bound is set for the
// bursts past it (an idle partition released, a jump in event time).
// Against no bound (WindowClosesPerRound(1<<30), BenchmarkWindowRatio's
// WINDOW_BENCH_CLOSES) it costs that benchmark nothing: every scan there,
// the final jump's included, takes one entry per key of its task (33.3k),
// so the bound never applies and the code path is the same.
const defaultCloseBurst = 64 * closeChunk

// WindowClosesPerRound bounds the window closes (and deletions of retained
// windows) each windowed operator of a task does in one processing round:
// the close-index entries it takes (in the row form of hopping windows an
// entry is a key, closing that key's due windows, at most size/advance).
// When the watermark passes more windows at once, the rest close in the
// next rounds, which run without waiting for input, in the order they
// would have closed in; records for them are late meanwhile (the watermark
// passed them). Under ExactlyOnce a round that leaves closes pending ends
// its transaction, so n bounds the results and state changes of a
// transaction's closes per operator. Default: 65536.
func WindowClosesPerRound(n int) Opt {
	return optFunc(func(c *config) { c.closeBurst = n })
}

// closedBefore reports whether index entry ik ('c', window end end) is of a
// window the store's mark says was closed before load read it (see the
// burst's cursor above).
func (o *windowOp[K, V, A]) closedBefore(ik []byte, end int64) bool {
	if o.closedThrough != nil {
		return bytes.Compare(ik, o.closedThrough) <= 0
	}
	return satAddMs(end, o.d.closeDelta()) <= o.closedBy
}

// freeLeftover reports whether close-index entry ik (window end end) is a
// leftover a restore derived for a window closed before (closedBefore)
// whose deletion is a store delete and nothing else: no result, no
// changelog record (the index is derived, so never logged; not the row
// form, whose entry holds open windows too, nor an index the database
// derives, whose leftover is a window to drop). A close scan deletes those
// outside its round's budget: they come back with every restore (their
// deletions are not logged), so a task restored between every two rounds
// of a burst whose leftovers outnumber the budget would otherwise spend
// each round on them and never close a window. Their number is bounded by
// the derived entries up to the mark, read once per restore.
func (o *windowOp[K, V, A]) freeLeftover(ik []byte, end int64) bool {
	return !o.dbIndex && !o.d.rows && o.st.spec.derivesCloseIndex() && o.closedBefore(ik, end)
}

// burstCursor is the cursor the store's mark persists while a burst is
// behind: the later of the scan's (resume) and the one load read
// (closedThrough). The first rounds after a restore take the leftover
// entries up to closedThrough, deleting them unread (closedBefore), so
// resume is behind closedThrough until the scan passes it; a mark with
// resume alone would then say the windows between the two are still to
// close, and the next restore (which derives their entries again from
// panes that outlive them) would close them a second time. Invariant:
// the mark's cursor never moves back within a burst.
func (o *windowOp[K, V, A]) burstCursor() []byte {
	if o.closedThrough != nil && bytes.Compare(o.resume[0], o.closedThrough) < 0 {
		return o.closedThrough
	}
	return o.resume[0]
}

// rowClosedBefore is closedBefore for window [end-size, end) of key kb's
// row (row form, window_pane_row.go). The rows a burst's closes write back
// are logged (closeRow), so a restored row holds a window the mark covers
// only if the window is at or before the mark's cursor (or, without one, the
// mark's watermark passed it): then it was closed before and is dropped
// unemitted; one after the cursor is still to close.
func (o *windowOp[K, V, A]) rowClosedBefore(kb []byte, end int64) bool {
	if o.closedThrough == nil {
		return satAddMs(end, o.d.closeDelta()) <= o.closedBy
	}
	return o.closedBefore(o.rowIndexKey(kb, end), end)
}

// rowCloseTouched is closeTouched for a store in row form: a record late
// for windows up to last (its pane is in them) whose key's row still has a
// window the watermark closed (its next ends by last.End: the row's closes
// are pending in a burst, or a restored row holds windows the mark
// covers) first closes every such window of the row, in end order, with
// one row close in the record's unit. Otherwise (every row but in a burst)
// it reads the row and does nothing more.
func (o *windowOp[K, V, A]) rowCloseTouched(kb []byte, last window.Window) error {
	rk := rowKey(nil, kb)
	v, found, err := o.get(rk)
	if err != nil || !found {
		return err
	}
	if len(v) < rowHeader || v[0] != rowFormat {
		return o.rowCorrupt(rk, errors.New("pane row without its header"))
	}
	next := int64(binary.BigEndian.Uint64(v[1:]))
	if next > last.End {
		return nil
	}
	o.closeTo = satAddMs(o.wm, -o.d.closeDelta())
	w := window.Window{Start: satAddMs(next, -o.d.tw.Size.Milliseconds()), End: next}
	_, err = o.closeRow(kb, w, true)
	return err
}

// closesPending reports whether the last round left window closes for the
// next ones (timed.go: the loop runs them at once).
func (o *windowOp[K, V, A]) closesPending() bool { return o.behind[0] || o.behind[1] }

// closeTouched closes, as part of the record being processed, those of key
// kb's windows ws (all closed by the operator's watermark) whose close is
// still pending in a burst: the record is about to write state their close
// would read (see above). A window the close scans passed, or that has no
// open index entry, is left alone.
func (o *windowOp[K, V, A]) closeTouched(kb []byte, ws []window.Window) (int, error) {
	n := 0
	for _, w := range ws {
		if w.End <= o.scanned[0] {
			continue // closed by the scans (or never open)
		}
		ik := indexKey(kb, w, false)
		if o.resume[0] != nil && bytes.Compare(ik, o.resume[0]) <= 0 {
			continue
		}
		if o.closedBefore(ik, w.End) {
			continue // a leftover entry the scan deletes unread
		}
		if _, found, err := o.get(ik); err != nil || !found {
			if err != nil {
				return n, err
			}
			continue
		}
		if _, err := o.closeWindow(ik, false, true); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// closeTouchedOf is closeTouched for a late sliding or session record
// (LateUpdates) about to update key kb's stored windows existing, read
// with keyWindows(kb, minEnd, maxStart): it returns them read again if it
// closed one.
func (o *windowOp[K, V, A]) closeTouchedOf(kb []byte, existing []keyWindow, minEnd, maxStart int64) ([]keyWindow, error) {
	var ws []window.Window
	for _, e := range existing {
		if o.closedWindow(e.w) {
			ws = append(ws, e.w)
		}
	}
	if len(ws) == 0 {
		return existing, nil
	}
	n, err := o.closeTouched(kb, ws)
	if err != nil || n == 0 {
		return existing, err
	}
	return o.keyWindows(kb, minEnd, maxStart)
}

// clWrite records a changelog write of a close: staged with the record
// being processed (rec), or at once.
func (o *windowOp[K, V, A]) clWrite(rec bool, key, value []byte, ts int64, created bool) {
	if rec {
		o.cl.write(key, value, ts, created)
		return
	}
	o.cl.writeNow(key, value, ts, created)
}

// deleteIndex deletes index entry ik, which a scan (or, rec, a read of the
// record being processed) found: a scan's without reading it again; a
// record's by an ordinary delete, which its rollback undoes exactly.
func (o *windowOp[K, V, A]) deleteIndex(ik []byte, ts int64, rec bool) error {
	if rec {
		return o.t.txn.Delete(o.name, ik)
	}
	return o.t.txn.DeleteKnown(o.name, ik, ts)
}

// paneTouched returns the windows a record's close-on-touch closes in pane
// layout: the windows it is late for (touched), after every earlier window
// of key kb still pending in the burst, in end order — a window's close
// deletes the panes it is the last to hold, which the earlier windows,
// closed in end order, no longer need; closed out of that order, they would
// lose them.
func (o *windowOp[K, V, A]) paneTouched(kb []byte, touched []window.Window) []window.Window {
	size, adv := o.d.tw.Size.Milliseconds(), o.d.tw.Advance.Milliseconds()
	// Windows ending at or below floor are closed.
	floor := o.scanned[0]
	switch {
	case o.closedThrough != nil:
		floor = max(floor, readEnd(o.closedThrough)-1)
	case o.closedBy != math.MinInt64:
		floor = max(floor, satAddMs(o.closedBy, -o.d.closeDelta()))
	}
	var ws []window.Window
	for s := touched[0].Start - adv; s < touched[0].Start; s -= adv {
		w := window.Window{Start: s, End: satAddMs(s, size)}
		if w.End <= floor {
			break
		}
		if len(o.paneKeysOf(o.loadKeys[:0], kb, w)) > 0 {
			ws = append(ws, w)
		}
	}
	slices.Reverse(ws)
	return append(ws, touched...)
}

// storeMark returns the watermark of a windowed store's mark in db
// (MinInt64: none), for queries.
func storeMark(db *state.DB, store string) (int64, error) {
	v, _, found, err := db.Get(store, markKey)
	if err != nil || !found || len(v) < 8 {
		return math.MinInt64, err
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// windowShown reports whether a query shows key, found in windowed store
// spec: not if it is a window the store's mark passed (gone).
func windowShown(db *state.DB, spec *storeSpec, key []byte) (bool, error) {
	_, _, end, err := timekey.ParseWindowKey(key)
	if err != nil {
		return true, nil // not a window entry
	}
	mark, err := storeMark(db, spec.name)
	if err != nil {
		return false, err
	}
	return !spec.win.gone(end, mark), nil
}

// gone reports whether the store keeps a window with end end only because
// a burst has not reached its close (or its deletion, retained) yet: the
// watermark of the store's mark passed it. Queries skip it.
func (d *windowDecl) gone(end, mark int64) bool {
	return mark != math.MinInt64 && satAddMs(satAddMs(end, d.closeDelta()), d.retain) <= mark
}

// burstDescription states the bound for App.Describe's line of a windowed
// store.
func (a *App) burstDescription() string {
	return fmt.Sprintf("; closes at most %d windows per round (more wait for the next rounds, closed to records "+
		"and hidden from queries meanwhile)", a.cfg.closeBurst)
}

package stream

import "bytes"

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
// cursor, and closes the ones after it (closedBefore). The mark and its
// cursor are one store key, so no prefix of the changelog separates them.
//
// Lateness while closes are pending: the watermark decides (as Flink's
// window operator and Kafka Streams' stream time do): a window whose close
// time the operator's watermark passed is closed for every record, whether
// or not the bound let its close run yet; a record reaching only such
// windows is late and goes to the late policy. The window's final result,
// when its close runs, holds exactly the records that were on time.
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
// unless WindowClosesPerRound says otherwise: sixteen of the close scan's
// database chunks.
const defaultCloseBurst = 16 * closeChunk

// WindowClosesPerRound bounds the window closes (and deletions of retained
// windows) each windowed operator of a task does in one processing round.
// When the watermark passes more windows at once, the rest close in the
// next rounds, which run without waiting for input, in the order they
// would have closed in; records for them are late meanwhile (the watermark
// passed them). Under ExactlyOnce a round that leaves closes pending ends
// its transaction, so n bounds the results and state changes of a
// transaction's closes per operator. Default: 16384.
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

// closesPending reports whether the last round left window closes for the
// next ones (timed.go: the loop runs them at once).
func (o *windowOp[K, V, A]) closesPending() bool { return o.behind[0] || o.behind[1] }

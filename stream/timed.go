package stream

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// timedOperator is an operator instance whose work follows time, not
// records: windows that close when the watermark passes them, timers that
// fire on the watermark or the processing clock, a bounded run's end. A task
// calls advance at the end of its part of every round — also of a round that
// polled nothing for it (a tick: an idle input's timeout, or the processing
// clock, may still move things) — with the task's watermark (ms; watermark.Min
// until it has one) and the processing clock.
//
// Invariants:
//   - advance runs on the task's goroutine, after every record of the round,
//     in node (topological) order together with the tables' round flushes
//     (tableFlusher): what an operator emits reaches operators after it
//     before they end the round;
//   - its store writes and outputs are the round's: applied with it, and
//     under ExactlyOnce part of the open transaction (an abort discards them
//     and the round is redone);
//   - the watermark it is given never goes backwards within a task's life
//     (watermark.Tracker), also across owners (it travels with the
//     committed offsets) — except after an aborted ExactlyOnce
//     transaction: the task's watermark goes back to where it joined the
//     transaction, together with the store writes and outputs of the
//     aborted rounds, and those rounds are redone. An operator therefore
//     keeps what it derives from the watermark in its stores (rolled back
//     with them), not in memory.
type timedOperator interface {
	nodeID() int
	advance(wm int64, now time.Time) error
}

// burstOperator is a time-driven operator that may leave work of a round
// for the next ones (a burst of window closes, window_burst.go).
type burstOperator interface {
	closesPending() bool
}

// closesPending reports whether a time-driven operator of the task left
// work for the next round: the loop then runs one without waiting for
// input (App.poll), ExactlyOnce ends the transaction first, and a bounded
// run does not end.
func (t *task) closesPending() bool {
	for _, op := range t.timed {
		if b, ok := op.(burstOperator); ok && b.closesPending() {
			return true
		}
	}
	return false
}

// closesPending reports whether a task of the App left time-driven work
// for the next round.
func (a *App) closesPending() bool {
	for _, t := range a.allTasks() {
		if t.closesPending() {
			return true
		}
	}
	return false
}

// addTimed registers a time-driven operator of the task, in node order.
func (t *task) addTimed(op timedOperator) {
	i := 0
	for i < len(t.timed) && t.timed[i].nodeID() < op.nodeID() {
		i++
	}
	t.timed = append(t.timed, nil)
	copy(t.timed[i+1:], t.timed[i:])
	t.timed[i] = op
}

// endOperators ends the round for the task's time-driven operators and,
// if flush, its table flushers, merged in node order; a time-driven operator
// before a flusher of the same node (a windowed operator's collapsed
// changelog, window_changelog.go, then holds the round's closes too).
func (t *task) endOperators(wm int64, now time.Time, flush bool) error {
	f, o := t.flushers, t.timed
	if !flush {
		f = nil
	}
	for len(f) > 0 || len(o) > 0 {
		if len(o) == 0 || (len(f) > 0 && f[0].nodeID() < o[0].nodeID()) {
			if err := f[0].flush(); err != nil {
				return err
			}
			f = f[1:]
			continue
		}
		if err := o[0].advance(wm, now); err != nil {
			return err
		}
		o = o[1:]
	}
	return nil
}

// emitTimed runs fn — a time-driven operator's work for one key or window,
// whose store writes and outputs must be all or nothing — as a record's
// processing is run: a failure of user code sends what origin names (the
// record that caused the state, or the window) to the dead-letter topic and
// the round goes on; a runtime failure is returned.
func (t *task) emitTimed(fn func() error, origin *kgo.Record) error {
	err := t.attempt(func(*kgo.Record) error { return fn() }, nil)
	if err == nil {
		return nil
	}
	var fatal *fatalError
	if errors.As(err, &fatal) {
		return fatal.err
	}
	now := t.app.cfg.clock.Now()
	t.deadLetter(origin, err, 1, now, now)
	return nil
}

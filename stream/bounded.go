package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BoundedOpt configures RunBounded.
type BoundedOpt interface{ applyBounded(*boundedRun) }

type boundedOptFunc func(*boundedRun)

func (f boundedOptFunc) applyBounded(b *boundedRun) { f(b) }

// UpTo ends each input partition of a bounded run before its first record
// whose Kafka timestamp is at or after ts (the broker's ListOffsets by time:
// a record later in the log with an earlier timestamp is not read either),
// or at its end at start if it has no such record.
func UpTo(ts time.Time) BoundedOpt {
	return boundedOptFunc(func(b *boundedRun) { b.upTo, b.hasUpTo = ts.UnixMilli(), true })
}

// ErrBoundedInterrupted is returned by RunBounded when its context ended
// before the run did (what was processed is committed; a new run goes on
// from there).
var ErrBoundedInterrupted = errors.New("stream: bounded run interrupted before the end of its input")

// RunBounded runs the App over a bounded input, as Flink runs a job over a
// bounded source: it reads each input topic's partitions up to their end
// offsets when it starts (under ExactlyOnce the last stable offsets; or up to
// a timestamp, UpTo) from the group's committed offsets, processes them and
// everything they write to repartition topics, then advances every task's
// watermark to the end of time — closing every window and firing every
// event-time timer, whose outputs are processed downstream in turn — commits
// and returns nil. Records appended after the start are left for a later run.
// Processing-time timers do not fire at the end (Flink quiesces them too).
//
// The App must be the only member of its group while it runs bounded (it
// waits until it owns every task). The end-of-time watermark is not kept:
// a later run resumes the watermark its records gave. If ctx ends first,
// RunBounded stops as Run does (committing what was processed) and returns
// ErrBoundedInterrupted. RunBounded and Run may be called once per App, not
// both.
func (a *App) RunBounded(ctx context.Context, opts ...BoundedOpt) error {
	b := &boundedRun{}
	for _, o := range opts {
		o.applyBounded(b)
	}
	if err := a.run(ctx, b); err != nil {
		return err
	}
	if !b.done {
		return ErrBoundedInterrupted
	}
	return nil
}

// boundedRun is the state of a bounded run (loop goroutine only).
//
// Phases: reading (external inputs up to their end offsets), then draining
// (repartition topics up to their ends once nothing upstream writes more),
// then finishing, one sub-topology at a time in topological order (their
// index order: a repartition topic's reading sub-topology is numbered after
// its writers): the tasks of sub-topologies below level run with the
// watermark at the end of time; the level rises once a round at that level
// wrote nothing more for a task downstream to read. As in Flink, where the
// end-of-input watermark follows the last records through every channel, a
// downstream task reaches the end of time only after every record its
// upstream wrote, including what the upstream's end wrote, was handled.
type boundedRun struct {
	upTo    int64
	hasUpTo bool

	// inputs are the external source topics (the bounded ones).
	inputs map[string]bool
	// ends maps each external source partition to the offset it is read
	// up to (only partitions with something to read).
	ends map[topicPartition]int64
	// start is the group's committed offset of every source partition
	// (internal ones included) when the run began.
	start  map[topicPartition]int64
	paused map[topicPartition]bool
	// quick: the inputs are read; polls wait briefly (only repartition
	// topics and ticks are left).
	quick bool
	// level: the tasks of sub-topologies below level run with the
	// watermark at the end of time (task.endBatch).
	level int
	// lastEnds are the repartition topics' ends at the previous check of
	// the finishing phase.
	lastEnds map[topicPartition]int64
	done     bool
}

// boundedEnd reports whether the tasks of sub-topology sub are past the end
// of a bounded run's input: their watermark is the end of time. False if the
// App does not run bounded.
func (a *App) boundedEnd(sub int) bool { return a.bounded != nil && sub < a.bounded.level }

// boundedLoop is the processing loop of a bounded run (see loop).
func (a *App) boundedLoop(ctx context.Context) error {
	b := a.bounded
	if b.ends == nil {
		if err := a.boundedInit(ctx); err != nil {
			return err
		}
	}
	clear(b.paused) // a new session's client has nothing paused
	for {
		if err := a.fatalErr(); err != nil {
			a.path.stop(false)
			return err
		}
		if ctx.Err() != nil {
			if err := a.path.stop(true); err != nil {
				a.cfg.logger.Warn("final transaction failed; the next owner replays", "err", err)
			}
			return nil
		}
		fetches := a.poll(ctx)
		if fetches.IsClientClosed() {
			return errors.New("client closed")
		}
		b.trim(fetches)
		if skip, err := a.path.skipRound(); skip {
			a.allowRebalance()
			if err != nil {
				return err
			}
			continue
		}
		complete, err := a.round(ctx, fetches)
		err = a.path.endRound(ctx, complete, err)
		if !a.path.holdsRebalance() {
			a.allowRebalance()
		}
		if ferr := a.fatalErr(); ferr != nil {
			a.path.stop(false)
			return ferr
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		finished, err := a.boundedStep(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if finished {
			b.done = true
			return a.path.stop(true)
		}
	}
}

// boundedInit lists where each input partition starts (the group's
// committed offsets) and ends.
func (a *App) boundedInit(ctx context.Context) error {
	b := a.bounded
	var external, all []string
	for topic, s := range a.sources {
		all = append(all, topic)
		if !s.internal {
			external = append(external, topic)
		}
	}
	slices.Sort(external)
	slices.Sort(all)
	ends, err := a.path.changelogEnds(ctx, a.adm, external...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("bounded run: end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	if b.hasUpTo {
		if byTime, err = a.adm.ListOffsetsAfterMilli(ctx, b.upTo, external...); err == nil {
			err = byTime.Error()
		}
		if err != nil {
			return fmt.Errorf("bounded run: offsets at %d: %w", b.upTo, err)
		}
	}
	starts, err := a.adm.ListStartOffsets(ctx, external...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("bounded run: start offsets: %w", err)
	}
	committed, err := a.adm.FetchOffsetsForTopics(ctx, a.id, all...)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// A group that never committed (some brokers say so before
		// its first join): every partition starts at its log start.
		committed, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("bounded run: committed offsets: %w", err)
	}
	b.start, b.ends, b.paused = map[topicPartition]int64{}, map[topicPartition]int64{}, map[topicPartition]bool{}
	b.inputs = map[string]bool{}
	for _, topic := range external {
		b.inputs[topic] = true
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			b.start[topicPartition{o.Topic, o.Partition}] = o.At
		}
	})
	ends.Each(func(o kadm.ListedOffset) {
		tp := topicPartition{o.Topic, o.Partition}
		end := o.Offset
		if t, ok := byTime.Lookup(o.Topic, o.Partition); ok && t.Offset >= 0 && t.Offset < end {
			end = t.Offset
		}
		from := b.start[tp]
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Offset > from {
			from = s.Offset
		}
		if end > from {
			b.ends[tp] = end
		}
	})
	a.cfg.logger.Info("bounded run", "partitions to read", len(b.ends))
	return nil
}

// trim drops the polled records at or past their partition's end, and
// pauses the partitions that reached it.
func (b *boundedRun) trim(fetches kgo.Fetches) {
	for i := range fetches {
		for j := range fetches[i].Topics {
			ft := &fetches[i].Topics[j]
			for k := range ft.Partitions {
				fp := &ft.Partitions[k]
				if !b.inputs[ft.Topic] {
					continue // a repartition topic: read all
				}
				end := b.ends[topicPartition{ft.Topic, fp.Partition}] // 0: nothing to read
				n := 0
				for _, r := range fp.Records {
					if r.Offset < end {
						fp.Records[n] = r
						n++
					}
				}
				clear(fp.Records[n:])
				fp.Records = fp.Records[:n]
			}
		}
	}
}

// position returns where the task owning tp stands on it: one past its last
// handled record, or the committed offset at start.
func (a *App) position(tp topicPartition) (int64, bool) {
	id, ok := a.taskOf(tp.topic, tp.partition)
	if !ok {
		return 0, false
	}
	a.mu.Lock()
	t := a.tasks[id]
	a.mu.Unlock()
	if t == nil {
		return 0, false
	}
	pos := a.bounded.start[tp]
	if n, ok := t.next[tp.topic]; ok && n.Offset > pos {
		pos = n.Offset
	}
	return pos, true
}

// allTasksOwned reports whether the App runs every task of its topology.
func (a *App) allTasksOwned() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range a.subs {
		for p := int32(0); p < a.taskCount(st); p++ {
			if a.tasks[taskID{st.idx, p}] == nil {
				return false
			}
		}
	}
	return true
}

// boundedStep advances the run's phase after a round; true once the run
// is complete (the caller ends the open transaction).
func (a *App) boundedStep(ctx context.Context) (bool, error) {
	b := a.bounded
	if !a.allTasksOwned() {
		return false, nil
	}
	// Pause the partitions read to their end; resume any an aborted
	// transaction moved back.
	pause, resume := map[string][]int32{}, map[string][]int32{}
	reading := false
	for tp, end := range b.ends {
		pos, _ := a.position(tp)
		switch {
		case pos >= end && !b.paused[tp]:
			pause[tp.topic] = append(pause[tp.topic], tp.partition)
			b.paused[tp] = true
		case pos < end && b.paused[tp]:
			resume[tp.topic] = append(resume[tp.topic], tp.partition)
			delete(b.paused, tp)
		}
		if pos < end {
			reading = true
		}
	}
	if len(pause) > 0 {
		a.cl.PauseFetchPartitions(pause)
	}
	if len(resume) > 0 {
		a.cl.ResumeFetchPartitions(resume)
	}
	if reading {
		return false, nil
	}
	b.quick = true
	// Everything upstream wrote must be readable before its ends are
	// listed: acknowledged, and under ExactlyOnce committed.
	if err := a.settle(ctx); err != nil {
		return false, err
	}
	ends, drained, err := a.repartitionDrained(ctx)
	if err != nil || !drained {
		return false, err
	}
	if a.closesPending() {
		return false, nil // a burst of window closes goes on (window_burst.go)
	}
	if b.level == 0 {
		// The next rounds (ticks for every task with time-driven
		// operators) run with the watermark of sub-topology 0 at the
		// end of time.
		b.level = 1
		b.lastEnds = ends
		a.cfg.logger.Info("bounded run: input read; watermarks to the end of time")
		return false, nil
	}
	// A round ran at this level since the last check: the level is done
	// if it wrote nothing more for a task downstream to read.
	if !maps.Equal(ends, b.lastEnds) {
		b.lastEnds = ends
		return false, nil
	}
	if b.level == len(a.subs) {
		return true, nil
	}
	b.level++
	return false, nil
}

// settle makes every record produced so far readable: flushed, and under
// ExactlyOnce committed (the open transaction ends; the next round opens
// another).
func (a *App) settle(ctx context.Context) error {
	if a.cfg.guarantee == ExactlyOnce {
		return a.path.stop(true)
	}
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	return a.cl.Flush(ctx)
}

// repartitionDrained lists the ends of the repartition topics and reports
// whether their tasks read up to them.
func (a *App) repartitionDrained(ctx context.Context) (map[topicPartition]int64, bool, error) {
	var internal []string
	for topic, s := range a.sources {
		if s.internal {
			internal = append(internal, topic)
		}
	}
	ends := map[topicPartition]int64{}
	if len(internal) == 0 {
		return ends, true, nil
	}
	listed, err := a.path.changelogEnds(ctx, a.adm, internal...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, false, fmt.Errorf("bounded run: repartition ends: %w", err)
	}
	drained := true
	listed.Each(func(o kadm.ListedOffset) {
		tp := topicPartition{o.Topic, o.Partition}
		ends[tp] = o.Offset
		if pos, ok := a.position(tp); !ok || pos < o.Offset {
			drained = false
		}
	})
	return ends, drained, nil
}

// boundedPollWait is how long a poll waits once a bounded run read its
// inputs.
const boundedPollWait = 20 * time.Millisecond

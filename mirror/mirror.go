package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Mirror copies topics from a source cluster to a target cluster. Run it
// with Run; its methods are not meant to be called concurrently, except
// that Run may be cancelled through its context at any time.
type Mirror struct {
	cfg     Config
	re      *regexp.Regexp
	groupRe *regexp.Regexp // SyncGroups; nil: no group offset sync
	met     *metrics

	// Per run of runOnce.
	src, tgt       *kgo.Client
	srcAdm, tgtAdm *kadm.Client
	topics         map[string]int32 // mirrored source topics and partition counts
	parts          map[tp]*partState

	// ALO pipeline (see alo.go): guarded by mu.
	mu      sync.Mutex
	syncQ   []offsetSync
	syncSig chan struct{}
	failed  error
	closing bool
	cancel  context.CancelFunc
}

// partState is the copy state of one source partition.
type partState struct {
	tp
	target string
	// srcNext is the next source offset to fetch (the poll loop's view).
	srcNext int64
	// tgtNext and lastTS are the target offset after the last copied data
	// record and the source timestamp of that record (ms), as synced.
	// With ExactlyOnce: owned by the poll loop. Otherwise guarded by
	// Mirror.mu (promises update them).
	tgtNext int64
	lastTS  int64
	// queue holds the batches of this partition produced and not yet
	// synced, in fetch order (at-least-once only). Guarded by Mirror.mu.
	queue []*batch
}

// batch is the records of one partition from one fetch.
type batch struct {
	ps      *partState
	recs    []*kgo.Record // as fetched, control records included
	srcNext int64         // source offset after the batch (markers included)
	records int
	bytes   int
	lastTS  int64
	pending atomic.Int64 // records not yet acknowledged
	maxOff  atomic.Int64 // largest target offset acknowledged, -1 if none
	done    bool         // every record acknowledged; guarded by Mirror.mu
}

// New validates cfg and returns a mirror. It registers the metrics with
// cfg.Registerer.
func New(cfg Config) (*Mirror, error) {
	c, re, err := cfg.withDefaults(true)
	if err != nil {
		return nil, err
	}
	groupRe, _ := c.groupRegex() // validated by withDefaults
	met, err := newMetrics(c.ID, c.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return &Mirror{cfg: c, re: re, groupRe: groupRe, met: met}, nil
}

// permanent errors end Run; any other error restarts the copy from the
// stored progress after a backoff.
func permanent(err error) bool {
	return errors.Is(err, ErrConfig) || errors.Is(err, ErrTopicMissing) || errors.Is(err, ErrPartitionMismatch) ||
		errors.Is(err, ErrBadSyncRecord)
}

// Run copies until ctx is cancelled, then stops cleanly (what was copied is
// synced) and returns nil. An error that a restart cannot cure
// (configuration, missing topic, partition mismatch, foreign records in the
// mirror's topics) is returned; any other error restarts the copy from the
// progress stored on the target, with a backoff of up to 10s. With
// Config.SyncGroups, the group offset sync runs beside the copy until Run
// returns.
func (m *Mirror) Run(ctx context.Context) error {
	if m.groupRe != nil {
		gctx, gcancel := context.WithCancel(ctx)
		gdone := make(chan struct{})
		go func() { defer close(gdone); m.syncGroupsLoop(gctx) }()
		defer func() { gcancel(); <-gdone }()
	}
	backoff := 100 * time.Millisecond
	for {
		err := m.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil || permanent(err) {
			return err
		}
		m.met.restarts.Inc()
		m.cfg.Logger.Warn("mirror restarting from its stored progress", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (m *Mirror) runOnce(parent context.Context) (err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	m.mu.Lock()
	m.failed, m.syncQ, m.cancel, m.closing = nil, nil, cancel, false
	m.syncSig = make(chan struct{}, 1)
	m.mu.Unlock()
	m.parts = map[tp]*partState{}

	m.cfg.Logger.Debug("mirror starting", "id", m.cfg.ID)
	adminCl, err := kgo.NewClient(m.cfg.sourceOpts()...)
	if err != nil {
		return fmt.Errorf("%w: source client: %w", ErrConfig, err)
	}
	defer adminCl.Close()
	m.srcAdm = kadm.NewClient(adminCl)
	topts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if m.cfg.ExactlyOnce {
		topts = append(topts, kgo.TransactionalID(m.cfg.txnID()))
	}
	m.tgt, err = kgo.NewClient(m.cfg.targetOpts(topts...)...)
	if err != nil {
		return fmt.Errorf("%w: target client: %w", ErrConfig, err)
	}
	defer m.tgt.Close()
	m.tgtAdm = kadm.NewClient(m.tgt)

	if err := ensureInternal(ctx, &m.cfg, m.tgtAdm); err != nil {
		return err
	}
	if m.topics, err = m.sourceTopics(ctx, true); err != nil {
		return err
	}
	if err := m.ensureTargets(ctx, m.topics); err != nil {
		return err
	}
	if m.cfg.ExactlyOnce {
		if err := m.claim(ctx); err != nil {
			return err
		}
	}
	offsets, err := m.startPartitions(ctx, partitionsOf(m.topics))
	if err != nil {
		return err
	}
	m.src, err = kgo.NewClient(m.cfg.sourceOpts(
		kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("%w: source consumer: %w", ErrConfig, err)
	}
	defer m.src.Close()
	m.cfg.Logger.Info("mirror started", "id", m.cfg.ID, "topics", len(m.topics), "partitions", len(m.parts),
		"exactly_once", m.cfg.ExactlyOnce)
	if m.cfg.ExactlyOnce {
		return m.loopEOS(ctx)
	}
	return m.loopALO(ctx)
}

// claim commits a transaction holding one run-start record: it initialises
// the transactional producer, which fences a previous instance of the
// mirror and aborts its open transaction, before progress is read.
func (m *Mirror) claim(ctx context.Context) error {
	if err := m.tgt.BeginTransaction(); err != nil {
		return err
	}
	r := &kgo.Record{Topic: m.cfg.progressTopic(), Partition: 0, Key: []byte("run:" + m.cfg.ID),
		Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))}
	if err := m.tgt.ProduceSync(ctx, r).FirstErr(); err != nil {
		_ = m.tgt.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return fmt.Errorf("claim transactional id %s: %w", m.cfg.txnID(), err)
	}
	return m.tgt.EndTransaction(ctx, kgo.TryCommit)
}

// dedupeLimit bounds how many target records after the last sync a restart
// compares with the source (it holds them in memory). The records in flight
// at a crash are bounded by the producer's buffer (franz-go's
// MaxBufferedRecords, 10000 by default), so more means something else
// writes to the target topic, and the mirror copies from its progress
// (duplicates).
const dedupeLimit = 100_000

// startPartitions reads the stored progress of parts and returns the
// source offset each resumes from. A partition without progress starts at
// the source's log start and gets an initial sync (its copies start at the
// target's current end). A partition whose target holds more data records
// after its last sync than the sync accounts for (a stop between an
// acknowledged produce and its sync) has them compared with the source: if
// they are the next source records, they are skipped (no duplicate);
// otherwise the copy resumes at the sync (duplicates on the target).
func (m *Mirror) startPartitions(ctx context.Context, parts []tp) (map[string]map[int32]kgo.Offset, error) {
	all, err := readSyncs(ctx, &m.cfg, m.tgtAdm, m.cfg.progressTopic())
	if err != nil {
		return nil, fmt.Errorf("read progress: %w", err)
	}
	progress := latestSyncs(all)
	topicSet := map[string]bool{}
	var targets, sources []string
	for _, p := range parts {
		if !topicSet[p.topic] {
			topicSet[p.topic] = true
			sources = append(sources, p.topic)
			targets = append(targets, m.cfg.targetName(p.topic))
		}
	}
	tgtEnd, err := endOffsets(ctx, m.tgtAdm, true, targets...)
	if err != nil {
		return nil, fmt.Errorf("target end offsets: %w", err)
	}
	srcStart, err := m.srcAdm.ListStartOffsets(ctx, sources...)
	if err == nil {
		err = srcStart.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("source start offsets: %w", err)
	}
	srcEnd, err := endOffsets(ctx, m.srcAdm, true, sources...)
	if err != nil {
		return nil, fmt.Errorf("source end offsets: %w", err)
	}
	offsets := map[string]map[int32]kgo.Offset{}
	var syncs []offsetSync
	now := time.Now().UnixMilli()
	for _, p := range parts {
		target := m.cfg.targetName(p.topic)
		tEnd, err := lookup(tgtEnd, target, p.partition)
		if err != nil {
			return nil, err
		}
		ps := &partState{tp: p, target: target, lastTS: -1}
		prog, ok := progress[p]
		switch {
		case !ok:
			if ps.srcNext, err = lookup(srcStart, p.topic, p.partition); err != nil {
				return nil, err
			}
			ps.tgtNext = tEnd
			syncs = append(syncs, ps.sync(now, true))
		case tEnd > prog.TargetOffset && !(m.cfg.ExactlyOnce && tEnd-prog.TargetOffset == 1):
			// (With ExactlyOnce, the one offset after the last sync is
			// its transaction's commit marker: nothing to compare.)
			sEnd, err := lookup(srcEnd, p.topic, p.partition)
			if err != nil {
				return nil, err
			}
			skipTo, skipped, err := m.alreadyCopied(ctx, prog, tEnd, sEnd)
			if err != nil {
				return nil, err
			}
			ps.srcNext, ps.tgtNext, ps.lastTS = skipTo, tEnd, prog.LastTimestampMs
			syncs = append(syncs, ps.sync(now, true))
			if skipTo != prog.Source {
				m.met.deduped.Add(float64(skipped))
				m.cfg.Logger.Info("target ahead of progress: copies found and skipped", "partition", p, "skipped", skipped, "resume_at", skipTo)
			}
		case tEnd < prog.TargetOffset:
			// The target partition lost records (topic recreated,
			// records deleted): the copy goes on from the progress, and
			// a restart sync keeps translations pointing at real offsets.
			ps.srcNext, ps.tgtNext, ps.lastTS = prog.Source, tEnd, prog.LastTimestampMs
			syncs = append(syncs, ps.sync(now, true))
			m.cfg.Logger.Warn("target partition ends before the stored progress: records below it are not copied again",
				"partition", p, "target_end", tEnd, "progress_target_offset", prog.TargetOffset)
		default:
			ps.srcNext, ps.tgtNext, ps.lastTS = prog.Source, prog.TargetOffset, prog.LastTimestampMs
		}
		m.parts[p] = ps
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.Offset{}
		}
		offsets[p.topic][p.partition] = kgo.NewOffset().At(ps.srcNext)
	}
	if err := m.writeSyncs(ctx, syncs); err != nil {
		return nil, err
	}
	return offsets, nil
}

// alreadyCopied compares the target's data records from prog.TargetOffset
// to tEnd with the source's from prog.Source on. If they are equal one for
// one (key, value, headers, timestamp), it returns the source offset after
// the last of them and their count; otherwise prog.Source and 0.
func (m *Mirror) alreadyCopied(ctx context.Context, prog offsetSync, tEnd, sEnd int64) (int64, int, error) {
	if tEnd-prog.TargetOffset > dedupeLimit {
		m.cfg.Logger.Warn("target holds too many records after the last sync to compare; copying from the sync",
			"topic", prog.Target, "partition", prog.Partition)
		return prog.Source, 0, nil
	}
	var onTarget []*kgo.Record
	err := scan(ctx, m.cfg.targetOpts(), prog.Target, prog.Partition, prog.TargetOffset, tEnd, true, func(r *kgo.Record) bool {
		if !r.Attrs.IsControl() {
			onTarget = append(onTarget, r)
		}
		return true
	})
	if err != nil || len(onTarget) == 0 {
		return prog.Source, 0, err
	}
	i, next, equal := 0, prog.Source, true
	err = scan(ctx, m.cfg.sourceOpts(), prog.Topic, prog.Partition, prog.Source, sEnd, true, func(r *kgo.Record) bool {
		if r.Attrs.IsControl() {
			next = r.Offset + 1
			return true
		}
		if !sameRecord(r, onTarget[i]) {
			equal = false
			return false
		}
		i++
		next = r.Offset + 1
		return i < len(onTarget)
	})
	if err != nil {
		return prog.Source, 0, err
	}
	if !equal || i < len(onTarget) {
		m.cfg.Logger.Warn("target records after the last sync are not the next source records; copying from the sync (duplicates on the target)",
			"topic", prog.Target, "partition", prog.Partition, "matched", i, "target_records", len(onTarget))
		return prog.Source, 0, nil
	}
	return next, i, nil
}

// sameRecord reports whether b is a copy of a.
func sameRecord(a, b *kgo.Record) bool {
	if !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Value, b.Value) ||
		(a.Value == nil) != (b.Value == nil) || !a.Timestamp.Equal(b.Timestamp) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// sync is the offset sync of the partition's current synced state.
func (ps *partState) sync(now int64, restart bool) offsetSync {
	return offsetSync{Version: syncVersion, Topic: ps.topic, Partition: ps.partition, Target: ps.target,
		Source: ps.srcNext, TargetOffset: ps.tgtNext, WrittenMs: now, LastTimestampMs: ps.lastTS, Restart: restart}
}

// writeSyncs stores syncs in the progress and offset-syncs topics and waits
// for them (in a transaction of their own with ExactlyOnce).
func (m *Mirror) writeSyncs(ctx context.Context, syncs []offsetSync) error {
	if len(syncs) == 0 {
		return nil
	}
	var recs []*kgo.Record
	for _, s := range syncs {
		recs = append(recs, s.record(m.cfg.progressTopic()), s.record(m.cfg.syncsTopic()))
	}
	if !m.cfg.ExactlyOnce {
		if err := m.tgt.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("write offset syncs: %w", err)
		}
		m.met.syncs.Add(float64(len(syncs)))
		return nil
	}
	if err := m.tgt.BeginTransaction(); err != nil {
		return err
	}
	if err := m.tgt.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = m.tgt.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return fmt.Errorf("write offset syncs: %w", err)
	}
	if err := m.tgt.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit offset syncs: %w", err)
	}
	m.met.syncs.Add(float64(len(syncs)))
	return nil
}

// copyOf is the target record copying source record r: same partition,
// key, value, headers and timestamp.
func (ps *partState) copyOf(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: ps.target, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
}

// newBatch makes the batch of fetched partition fp (records of ps), or nil
// if fp holds nothing new.
func newBatch(ps *partState, recs []*kgo.Record) *batch {
	if len(recs) == 0 {
		return nil
	}
	b := &batch{ps: ps, recs: recs, srcNext: recs[len(recs)-1].Offset + 1, lastTS: -1}
	b.maxOff.Store(-1)
	for _, r := range recs {
		if r.Attrs.IsControl() {
			continue
		}
		b.records++
		b.bytes += len(r.Key) + len(r.Value)
		b.lastTS = r.Timestamp.UnixMilli()
	}
	b.pending.Store(int64(b.records))
	return b
}

// rescan adds the topics and partitions that appeared on the source since
// the last scan, and returns their start offsets for the consumer.
func (m *Mirror) rescan(ctx context.Context) (map[string]map[int32]kgo.Offset, error) {
	now, err := m.sourceTopics(ctx, false)
	if err != nil {
		return nil, err
	}
	grown := map[string]int32{}
	var fresh []tp
	for t, n := range now {
		if n > m.topics[t] {
			grown[t] = n
			for p := m.topics[t]; p < n; p++ {
				fresh = append(fresh, tp{t, p})
			}
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if err := m.ensureTargets(ctx, grown); err != nil {
		return nil, err
	}
	offsets, err := m.startPartitions(ctx, fresh)
	if err != nil {
		return nil, err
	}
	for t, n := range grown {
		m.topics[t] = n
	}
	m.cfg.Logger.Info("new source partitions mirrored", "partitions", len(fresh))
	return offsets, nil
}

// poll fetches up to MaxPollRecords, returning empty at rescanAt (when
// rescans are on) so that new topics are found while the copied ones are idle.
func (m *Mirror) poll(ctx context.Context, rescanAt time.Time) kgo.Fetches {
	if m.cfg.RescanInterval <= 0 {
		return m.src.PollRecords(ctx, m.cfg.MaxPollRecords)
	}
	pctx, cancel := context.WithDeadline(ctx, rescanAt)
	defer cancel()
	return m.src.PollRecords(pctx, m.cfg.MaxPollRecords)
}

// pollErrors logs the errors of a fetch and returns the first that ends
// the run. Data loss (the source dropped records before they were copied)
// is counted and logged; the copy continues from the source's log start.
func (m *Mirror) pollErrors(fs kgo.Fetches) error {
	var fatal error
	fs.EachError(func(t string, p int32, err error) {
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = err
		default:
			var dl *kgo.ErrDataLoss
			if errors.As(err, &dl) {
				m.met.dataLoss.Inc()
				m.cfg.Logger.Error("source records lost before they were copied", "topic", t, "partition", p, "err", err)
				return
			}
			m.cfg.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
		}
	})
	return fatal
}

// fetchedBatches turns a fetch into batches, advancing each partition's
// fetch position and lag metrics.
func (m *Mirror) fetchedBatches(fs kgo.Fetches) []*batch {
	var out []*batch
	now := time.Now()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		ps := m.parts[tp{fp.Topic, fp.Partition}]
		if ps == nil {
			return
		}
		// A fetch may repeat offsets below the position after a reset
		// by the client: never copy a record twice.
		recs := fp.Records
		for len(recs) > 0 && recs[0].Offset < ps.srcNext {
			recs = recs[1:]
		}
		b := newBatch(ps, recs)
		if b == nil {
			return
		}
		ps.srcNext = b.srcNext
		lag := fp.LastStableOffset - b.srcNext
		secs := 0.0
		if lag > 0 && b.lastTS >= 0 {
			secs = now.Sub(time.UnixMilli(b.lastTS)).Seconds()
		}
		m.met.setLag(ps.tp, lag, secs)
		out = append(out, b)
	})
	return out
}

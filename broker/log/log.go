package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/vfs"
)

// SyncPolicy says when appended data is fsynced.
type SyncPolicy int

const (
	// SyncAlways (the default): group commit. A durable Append returns only
	// after an fsync covering its bytes; concurrent appenders share fsyncs.
	// The high watermark covers only synced data, so a reader never sees a
	// record a power loss could take back. Non-durable appends are synced
	// promptly in the background and become visible then.
	SyncAlways SyncPolicy = iota
	// SyncInterval fsyncs every Options.SyncInterval. The high watermark is
	// the log end: appends are visible at once and acknowledged before they
	// are on disk. NOT DURABLE ON POWER LOSS: up to one interval of
	// acknowledged data can be lost (a process crash alone loses nothing;
	// the page cache survives it).
	SyncInterval
)

// TimestampType is message.timestamp.type.
type TimestampType int

const (
	// CreateTime keeps the producer's timestamps.
	CreateTime TimestampType = iota
	// LogAppendTime: the log sets each batch's maxTimestamp to the append
	// time and sets the timestamp-type attribute bit (recomputing the CRC).
	LogAppendTime
)

// Kafka defaults for the zero values of Config.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	DefaultRetentionMs        = 7 * 24 * 60 * 60 * 1000
	DefaultMaxMessageBytes    = 1048588
	DefaultIndexIntervalBytes = 4096
	// DefaultTimestampAfterMaxMs is Kafka 4's
	// message.timestamp.after.max.ms (one hour); the before bound has no
	// default limit.
	DefaultTimestampAfterMaxMs = 60 * 60 * 1000
	// DefaultSyncInterval is used for SyncInterval when
	// Options.SyncInterval is 0.
	DefaultSyncInterval = time.Second
)

// Config is the per-partition (topic) configuration. Zero values mean the
// Kafka defaults.
type Config struct {
	SegmentBytes       int64 // segment.bytes, default 1 GiB, at most 2 GiB-1
	SegmentMs          int64 // segment.ms, default 7d
	RetentionMs        int64 // retention.ms, default 7d; -1 = unlimited
	RetentionBytes     int64 // retention.bytes, default -1 = unlimited
	MaxMessageBytes    int32 // max.message.bytes, default 1048588
	TimestampType      TimestampType
	IndexIntervalBytes int32 // index.interval.bytes, default 4096
	Compact            bool  // cleanup.policy contains compact
	Delete             bool  // cleanup.policy contains delete (if neither is set: delete)
	// Compaction (see clean.go). Zero values mean the Kafka defaults.
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio, default 0.5; < 0 means 0
	MinCompactionLagMs     int64   // min.compaction.lag.ms, default 0
	MaxCompactionLagMs     int64   // max.compaction.lag.ms, default unlimited
	DeleteRetentionMs      int64   // delete.retention.ms, default 1 day; < 0 means 0
	// Timestamp bounds (CreateTime only; LogAppendTime overwrites the
	// producer's timestamps): an append holding a record stamped more than
	// TimestampBeforeMaxMs before the log's clock, or more than
	// TimestampAfterMaxMs after it, fails with a *TimestampError. Records
	// without a timestamp (-1) are not checked. Zero values mean Kafka's
	// defaults (unlimited before, one hour after); < 0 means 0.
	TimestampBeforeMaxMs int64 // message.timestamp.before.max.ms
	TimestampAfterMaxMs  int64 // message.timestamp.after.max.ms
}

// withDefaults fills in zero values.
func (c Config) withDefaults() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32 // positions in the offset index are uint32
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = DefaultRetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if !c.Compact && !c.Delete {
		c.Delete = true
	}
	c = c.compactionDefaults()
	switch {
	case c.TimestampBeforeMaxMs == 0:
		c.TimestampBeforeMaxMs = math.MaxInt64
	case c.TimestampBeforeMaxMs < 0:
		c.TimestampBeforeMaxMs = 0
	}
	switch {
	case c.TimestampAfterMaxMs == 0:
		c.TimestampAfterMaxMs = DefaultTimestampAfterMaxMs
	case c.TimestampAfterMaxMs < 0:
		c.TimestampAfterMaxMs = 0
	}
	return c
}

// Options configure Open.
type Options struct {
	FS     vfs.FS // default vfs.Default
	Dir    string // the partition's directory (created if missing)
	Config Config
	Sync   SyncPolicy
	// SyncInterval is the fsync period of the SyncInterval policy
	// (default 1s).
	SyncInterval time.Duration
	Now          func() time.Time // default time.Now
	Logger       *slog.Logger     // default: discard
}

// AppendResult describes a successful Append.
type AppendResult struct {
	BaseOffset, LastOffset int64 // offsets of the first/last appended record
	LogAppendTime          int64 // ms; -1 unless TimestampType == LogAppendTime
	LogStartOffset         int64
	Batches                []BatchInfo
	// Duplicate: the batch was already in the log (same producer, epoch
	// and sequences among its last ProducerWindow batches). Nothing was
	// appended; BaseOffset/LastOffset are the original batch's and
	// Batches is empty. Kafka answers such a produce with success.
	Duplicate bool
	// durableEnd and durableEpoch say what WaitDurable waits for: the
	// synced end must reach durableEnd without a rollback (after
	// durableEpoch) cutting below it. durableEnd 0: nothing to wait for.
	durableEnd   int64
	durableEpoch uint64
}

// BatchInfo is the parsed header of one appended batch, with the offsets the
// log assigned.
type BatchInfo struct {
	BaseOffset, LastOffset int64
	ProducerID             int64
	ProducerEpoch          int16
	BaseSequence           int32
	NumRecords             int32
	Transactional, Control bool
	MaxTimestamp           int64
}

// ReadResult is the outcome of a Read.
type ReadResult struct {
	// Data is whole RecordBatch v2 bytes exactly as stored, in a pooled
	// buffer valid until Release.
	Data                          []byte
	HighWatermark, LogStartOffset int64
	// Release returns Data's buffer to the pool. Call it once, after the
	// bytes are written out; it is never nil.
	Release func()
}

// syncPoint is a position in the log: the end of the written (or synced)
// data, with the max timestamp of its segment up to there.
type syncPoint struct {
	seg      *segment
	pos      int64 // byte position in seg
	next     int64 // offset of the next batch
	maxTs    int64
	maxTsOff int64
}

// Log is one partition: a directory of segments. It is goroutine-safe:
// appends are serialised by mu; reads run concurrently with appends and with
// each other.
//
// Lock order (outer first): ckptMu -> metaMu -> mu -> segsMu -> seg.idxFileMu
// -> seg.mu -> syncMu, and mu -> ps.mu (producer state; no Log lock is taken
// under it). ckptFileMu and snapMu are leaves: nothing else is locked while
// one is held. A function named …Locked expects mu held. No lock is held
// across an fsync of the data file by the group-commit leader; mu is held
// across the fsyncs of a segment roll (rare) and for the rollback after a
// failed write or fsync.
type Log struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger
	now    func() time.Time
	policy SyncPolicy
	every  time.Duration
	cfg    atomic.Pointer[Config]

	ckptMu     sync.Mutex // serialises periodic checkpoints with Close
	ckptFileMu sync.Mutex // guards the recovery-point file and lastCkpt
	lastCkpt   checkpoint
	lastCkptAt time.Time // wall clock, for pacing only
	haveCkpt   bool
	metaMu     sync.Mutex // serialises log-start-offset writes

	mu     sync.Mutex // append lock
	shut   bool       // Close has begun; guarded by mu
	next   int64      // log end offset; guarded by mu (also in leo)
	active *segment   // guarded by mu (written under segsMu too)
	// useTick drives the LRU of loaded indexes (atomic).
	useTick atomic.Uint64

	segsMu sync.RWMutex
	segs   []*segment // sorted by base; the last is active

	leo      atomic.Int64
	hw       atomic.Int64
	logStart atomic.Int64

	syncMu   sync.Mutex
	syncCond *sync.Cond
	written  syncPoint // end of the data written, published by the appender
	synced   syncPoint // end of the data known durable
	syncing  bool      // a group-commit leader is in fsync
	// syncDone is closed (and replaced) whenever synced advances, a
	// rollback happens or the log closes: WaitDurable selects on it with
	// its context.
	syncDone  chan struct{}
	rollbacks uint64  // count of rollbacks after failed fsyncs
	rbPoints  []int64 // rbPoints[i]: log end after rollback i+1
	rbErr     error   // the error that caused the last rollback
	changed   chan struct{}
	isClosed  bool // guarded by syncMu; also closed below

	closed   atomic.Bool
	kick     chan struct{} // wakes the background syncer
	stop     chan struct{}
	bgDone   chan struct{}
	bufPools [numBufClasses]sync.Pool // read buffers by size class
	codecs   codecs                   // decompressors for validation and timestamp lookups
	ps       *producerState           // idempotence and transactions, see producer.go
	// recovered and scanFrom: the producer batches the recovery scan saw
	// from offset scanFrom on (-1: nothing scanned); used once by Open.
	recovered []recoveredBatch
	scanFrom  int64
	// snapMu serialises producer snapshot file writes (after mu).
	snapMu sync.Mutex
	// indexBudget: bytes of closed-segment indexes kept loaded.
	indexBudget int
	// cleaner is the compaction state (clean.go).
	cleaner cleanerState
}

// Open opens (creating if needed) the partition in opts.Dir, recovering
// from a crash if the last shutdown was not clean.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("log: Options.Dir is empty")
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Sync != SyncAlways && opts.Sync != SyncInterval {
		return nil, fmt.Errorf("log: unknown sync policy %d", opts.Sync)
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	l := &Log{
		fs:          opts.FS,
		dir:         opts.Dir,
		logger:      opts.Logger.With("log", opts.Dir),
		now:         opts.Now,
		policy:      opts.Sync,
		every:       opts.SyncInterval,
		changed:     make(chan struct{}),
		syncDone:    make(chan struct{}),
		kick:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		bgDone:      make(chan struct{}),
		indexBudget: indexBudget,
		ps:          newProducerState(),
	}
	l.syncCond = sync.NewCond(&l.syncMu)
	cfg := opts.Config.withDefaults()
	l.cfg.Store(&cfg)
	err := l.recover()
	if err == nil {
		err = l.recoverProducerState()
	}
	if err != nil {
		for _, s := range l.segs {
			s.closeFiles()
		}
		return nil, err
	}
	// A crash may have left blocks reserved past the end of the active
	// segment (see prealloc.go): give them back at its roll or close.
	l.active.pre.maybeBeyond = l.active.f.Fd() != invalidFd
	// Checkpoint pacing counts from the open: the recovery point found or
	// written by it is as recent as a checkpoint taken now, so the first
	// periodic one is due after checkpointBytes or checkpointMaxAge like
	// any other (not at the first tick after data arrives, when it would
	// spare a crash recovery only the scan of that first second).
	l.ckptFileMu.Lock()
	l.lastCkptAt = time.Now()
	l.ckptFileMu.Unlock()
	go l.background()
	return l, nil
}

func (l *Log) config() *Config { return l.cfg.Load() }

// SetConfig changes the configuration (AlterConfigs). It applies to the
// next append, roll and retention pass.
func (l *Log) SetConfig(c Config) {
	c = c.withDefaults()
	l.cfg.Store(&c)
}

// Dir returns the partition's directory.
func (l *Log) Dir() string { return l.dir }

// HighWatermark is the next offset visible to readers: under SyncAlways the
// end of the synced data, under SyncInterval the log end.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// LogStartOffset is the first offset that can be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// Size is the total size in bytes of the segment files.
func (l *Log) Size() int64 {
	l.segsMu.RLock()
	defer l.segsMu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size.Load()
	}
	return n
}

// Changed returns a channel closed the next time the high watermark
// advances (or the log is closed). Long-poll fetches wait on it: take the
// channel first, then check HighWatermark, then wait, so that no advance
// is missed.
func (l *Log) Changed() <-chan struct{} {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.changed
}

// setHW advances the high watermark. syncMu must be held.
func (l *Log) setHW(v int64) {
	if v > l.hw.Load() {
		l.hw.Store(v)
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// Close syncs everything, writes the index files and a clean checkpoint (so
// the next Open scans nothing) and closes the files. Appends waiting for an
// fsync complete first.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return ErrClosed
	}
	close(l.stop)
	<-l.bgDone
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shut = true
	var errs []error
	// Make everything written durable (and release waiters).
	if err := l.syncAllLocked(); err != nil {
		errs = append(errs, err)
	}
	act := l.active
	if len(errs) == 0 {
		act.releasePrealloc(l)
		if err := act.flushIndexes(math.MaxInt64, math.MaxInt64); err != nil {
			errs = append(errs, storageErr("flush index", err))
		}
	}
	if len(errs) == 0 {
		l.syncMu.Lock()
		p := l.synced
		l.syncMu.Unlock()
		if err := l.writeSnapshotLocked(); err != nil {
			errs = append(errs, err)
		} else if p.seg == act {
			c := checkpoint{clean: true, segBase: act.base, pos: p.pos, next: p.next, maxTs: p.maxTs, maxTsOff: p.maxTsOff}
			if err := l.writeCheckpoint(c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	l.syncMu.Lock()
	l.isClosed = true
	close(l.changed)
	l.changed = make(chan struct{})
	l.notifySyncedLocked()
	l.syncMu.Unlock()
	l.segsMu.Lock()
	segs := l.segs
	l.segs = nil
	l.segsMu.Unlock()
	for _, s := range segs {
		s.release(l)
	}
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if errors.Is(cerr, ErrClosed) {
		cerr = nil
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return storageErr("remove log dir", err)
	}
	if err := vfs.SyncDir(l.fs, parentDir(l.dir)); err != nil {
		return storageErr("sync parent dir", err)
	}
	return cerr
}

// background runs the periodic fsync (SyncInterval), the prompt fsync of
// non-durable appends (SyncAlways) and periodic checkpoints.
func (l *Log) background() {
	defer close(l.bgDone)
	var tick <-chan time.Time
	if l.policy == SyncInterval {
		t := time.NewTicker(l.every)
		defer t.Stop()
		tick = t.C
	}
	ckpt := time.NewTicker(checkpointEvery)
	defer ckpt.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			l.syncWritten()
		case <-tick:
			l.syncWritten()
		case <-ckpt.C:
			if err := l.checkpoint(false); err != nil {
				l.logger.Warn("checkpoint failed", "err", err)
			}
		}
	}
}

// checkpointEvery is how often the background goroutine considers
// advancing the recovery point (see checkpointBytes).
const checkpointEvery = time.Second

package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/weirhq/weir/internal/crc32c"
	"github.com/weirhq/weir/vfs"
)

// The swap of a cleaned group of segments, atomic with respect to a crash at
// any point (Kafka's .cleaned/.swap scheme, with the replaced set written
// down explicitly):
//
//  1. The new segment (named by the group's first base B) is written as
//     B.log.cleaned, B.index.cleaned, B.timeindex.cleaned (and
//     B.txnindex.cleaned if the group has aborted transactions), each
//     fsynced.
//  2. The commit point: the clean-swap file (magic WCSW, the new base or -1
//     if nothing was kept, the bases of the replaced segments, CRC-32C) is
//     written atomically (temp, fsync, rename, fsync dir — which also makes
//     the .cleaned entries durable).
//  3. The segment list in memory is switched.
//  4. The replaced segments' files are removed (.log first); fsync dir.
//  5. The .cleaned files are renamed to their final names, the .log last;
//     fsync dir.
//  6. clean-swap is removed; fsync dir.
//
// Open (recoverCleanSwap, before anything else) finishes or undoes it:
// without a valid clean-swap file every *.cleaned file is removed (the old
// segments were not touched: rollback); with one, if B.log.cleaned still
// exists steps 4-6 are redone (idempotent), otherwise the .log rename
// happened, so steps 4 and 5 are complete and only 6 is left. Either the old
// or the new set is on disk afterwards, never a mix.
//
// Kafka derives the replaced range from the swap segment's offsets; that
// misses trailing segments whose records were all removed, hence the list.

const (
	cleanedSuffix   = ".cleaned"
	cleanSwapFile   = "clean-swap"
	cleanSwapMagic  = "WCSW"
	cleanCkptFile   = "cleaner-checkpoint"
	cleanCkptMagic  = "WCCP"
	cleanFileVer    = 1
	maxCleanPasses  = 32
	maxSwapSegments = 1 << 16
	// cleanSyncEvery: where writeBack is unavailable (no OS descriptor,
	// not Linux), the cleaned segment is fsynced every this many
	// bytes written.
	cleanSyncEvery = 1 << 20
)

// encodeCleanSwap encodes the clean-swap file.
func encodeCleanSwap(newBase int64, old []int64) []byte {
	b := append([]byte(cleanSwapMagic), cleanFileVer, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(newBase))
	b = binary.BigEndian.AppendUint32(b, uint32(len(old)))
	for _, o := range old {
		b = binary.BigEndian.AppendUint64(b, uint64(o))
	}
	return binary.BigEndian.AppendUint32(b, crc32c.Checksum(b))
}

// decodeCleanSwap decodes the clean-swap file.
func decodeCleanSwap(b []byte) (newBase int64, old []int64, err error) {
	d, err := checkFile(b, cleanSwapMagic)
	if err != nil {
		return 0, nil, err
	}
	newBase = d.i64()
	n := d.i32()
	if d.failed() || n < 1 || n > maxSwapSegments || int(n)*8 != d.left() {
		return 0, nil, errors.New("bad clean-swap length")
	}
	for range n {
		o := d.i64()
		if o < 0 {
			return 0, nil, errors.New("negative base in clean-swap")
		}
		old = append(old, o)
	}
	if newBase < -1 {
		return 0, nil, errors.New("bad new base in clean-swap")
	}
	return newBase, old, nil
}

// encodeCleanCkpt encodes the cleaner checkpoint: the passes (end offset,
// time ms), oldest first.
func encodeCleanCkpt(ps []cleanPass) []byte {
	b := append([]byte(cleanCkptMagic), cleanFileVer, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ps)))
	for _, p := range ps {
		b = binary.BigEndian.AppendUint64(b, uint64(p.End))
		b = binary.BigEndian.AppendUint64(b, uint64(p.TimeMs))
	}
	return binary.BigEndian.AppendUint32(b, crc32c.Checksum(b))
}

// decodeCleanCkpt decodes the cleaner checkpoint.
func decodeCleanCkpt(b []byte) ([]cleanPass, error) {
	d, err := checkFile(b, cleanCkptMagic)
	if err != nil {
		return nil, err
	}
	n := d.i32()
	if d.failed() || n < 0 || n > maxCleanPasses || int(n)*16 != d.left() {
		return nil, errors.New("bad cleaner checkpoint length")
	}
	var ps []cleanPass
	for range n {
		p := cleanPass{End: d.i64(), TimeMs: d.i64()}
		if p.End < 0 || (len(ps) > 0 && p.End < ps[len(ps)-1].End) {
			return nil, errors.New("cleaner checkpoint entries out of order")
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// loadCleanerLocked reads the cleaner checkpoint once. A damaged one is
// logged and ignored (the next pass cleans everything again; tombstones are
// then kept for a full delete.retention.ms more). cleaner.mu must be held.
func (l *Log) loadCleanerLocked() error {
	if l.cleaner.loaded {
		return nil
	}
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, cleanCkptFile))
	switch {
	case err == nil:
		ps, derr := decodeCleanCkpt(b)
		if derr != nil {
			l.logger.Error("ignoring damaged cleaner checkpoint", "err", &CorruptionError{Segment: cleanCkptFile, Reason: derr.Error()})
		} else {
			l.cleaner.passes = ps
		}
	case isNotExist(err):
	default:
		return storageErr("read cleaner checkpoint", err)
	}
	l.cleaner.loaded = true
	l.mirrorPassesLocked()
	return nil
}

// addCleanPass appends a pass to the checkpoint and persists it.
// cleaner.mu must be held.
func (l *Log) addCleanPass(p cleanPass, retentionMs, nowMs int64) error {
	ps := compactPasses(append(append([]cleanPass(nil), l.cleaner.passes...), p), retentionMs, nowMs)
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, cleanCkptFile), encodeCleanCkpt(ps)); err != nil {
		return storageErr("write cleaner checkpoint", err)
	}
	l.cleaner.passes = ps
	l.mirrorPassesLocked()
	return nil
}

// compactPasses bounds the pass list to maxCleanPasses. A tombstone at
// offset o is removable once the first pass with End > o is
// delete.retention.ms old, so merging two adjacent passes into the later
// one (its End, its time) only keeps some tombstones longer, never shorter:
//   - the passes already delete.retention.ms old are merged into the newest
//     of them (the horizon is the largest End among them: unchanged);
//   - then, while too many, the adjacent pair closest in time is merged (the
//     least delay; the newest such pair). Dropping the oldest instead would, on a log cleaned more
//     often than delete.retention.ms / maxCleanPasses, never keep a pass old
//     enough, and its tombstones would stay forever.
func compactPasses(ps []cleanPass, retentionMs, nowMs int64) []cleanPass {
	if len(ps) <= maxCleanPasses {
		return ps
	}
	old := 0
	for old < len(ps) && nowMs-ps[old].TimeMs >= retentionMs {
		old++
	}
	if old > 1 {
		ps = append(ps[:0:0], ps[old-1:]...)
	}
	for len(ps) > maxCleanPasses {
		best := 0
		for i := 1; i+1 < len(ps); i++ {
			// <=: on ties the newest pair (young offsets, delayed least in
			// relative terms; the old passes keep the list's time span).
			if ps[i+1].TimeMs-ps[i].TimeMs <= ps[best+1].TimeMs-ps[best].TimeMs {
				best = i
			}
		}
		ps = append(ps[:best], ps[best+1:]...)
	}
	return ps
}

// cleanGroup rewrites the group segs (consecutive closed segments; next is
// the base of the segment after the last) and swaps the result in.
// cleaner.mu must be held.
func (l *Log) cleanGroup(segs []*segment, next int64, om *offsetMap, horizon int64, tt *txnTracker, nowMs int64, thr *throttle, bufs *cleanBufs, cfg *Config) (groupStats, error) {
	var st groupStats
	base := segs[0].base
	// Producers' last data batches (their headers are kept, as Kafka's
	// cleaner does, so the sequence window survives a rebuild from the log).
	lastOf := map[int64]int64{}
	l.ps.mu.RLock()
	for pid, e := range l.ps.producers {
		if e.n > 0 {
			lastOf[pid] = e.batches[e.n-1].lastOff
		}
	}
	l.ps.mu.RUnlock()

	ns := &segment{base: base, fs: l.fs, dir: l.dir, ix: newIndexState(base), maxTsKnown: true, loaded: true}
	ns.refs.Store(1)
	logName := ns.path(logSuffix) + cleanedSuffix
	f, err := l.fs.Create(logName)
	if err != nil {
		return st, storageErr("create "+logName, err)
	}
	ns.f = f
	w := newCleanWriter(f, logName, thr, bufs.write)
	fail := func(err error) (groupStats, error) {
		st.written = w.written
		f.Close()
		l.removeCleaned(base)
		return st, err
	}
	interval := int64(cfg.IndexIntervalBytes)
	defer func() { bufs.write = w.buf[:0] }()
	var lastDropped []byte
	for _, s := range segs {
		sc := newSegmentScanner(l, s, thr, bufs.read)
		for {
			b, h, err := sc.next()
			if err != nil {
				st.read += sc.read
				bufs.read = sc.scanBuf()
				return fail(err)
			}
			if b == nil {
				break
			}
			var out []byte
			if h.Attributes&attrControl != 0 {
				var dropped bool
				if out, dropped = filterMarker(b, &h, tt, nowMs, cfg.DeleteRetentionMs); dropped {
					st.markers++
				}
			} else {
				var removed int64
				out, removed, err = l.filterBatch(b, h, om, horizon, lastOf, tt, &bufs.scratch)
				st.removed += removed
				if err != nil {
					st.read += sc.read
					bufs.read = sc.scanBuf()
					return fail(err)
				}
			}
			if out == nil {
				// The group's placeholder if it ends up empty: neutral,
				// so no producer or transaction is left half in the log
				// (a dropped batch is never its producer's last).
				lastDropped = append(lastDropped[:0], b[:batchHeaderSize]...)
				continue
			}
			if w.pos+int64(len(out)) > math.MaxInt32 {
				st.read += sc.read
				bufs.read = sc.scanBuf()
				return fail(fmt.Errorf("log: cleaned segment %s would exceed 2 GiB", ns.name()))
			}
			oh := parseHeader(out)
			ns.ix.note(w.pos, &oh, interval)
			if err := w.add(out); err != nil {
				st.read += sc.read
				bufs.read = sc.scanBuf()
				return fail(err)
			}
		}
		st.read += sc.read
		bufs.read = sc.scanBuf()
	}
	if w.pos == 0 && lastDropped != nil {
		// Keep the segment (and so the log start): one empty batch.
		eb := neutralEmptyBatch(lastDropped)
		oh := parseHeader(eb)
		ns.ix.note(0, &oh, interval)
		if err := w.add(eb); err != nil {
			return fail(err)
		}
	}
	pos := w.pos
	ns.ix.addTimeEntry()
	ns.size.Store(pos)
	kept := tt.takeKept()
	newBase := base
	if pos == 0 {
		newBase = -1 // nothing kept: the group's segments are just removed
		f.Close()
		ns.f = nil
		_ = l.fs.Remove(logName)
	} else {
		if err := w.sync(); err != nil {
			return fail(err)
		}
		if err := l.writeCleanedIndexes(ns, kept); err != nil {
			return fail(err)
		}
	}
	st.written = w.written
	pruned, err := l.swapGroup(segs, ns, newBase, kept)
	if err != nil {
		if ns.f != nil {
			ns.f.Close()
		}
		return st, err
	}
	st.pruned = int64(pruned)
	return st, nil
}

// writeCleanedIndexes writes ns's .index, .timeindex and (if the group keeps
// aborted transactions, as) .txnindex as .cleaned files, fsynced.
func (l *Log) writeCleanedIndexes(ns *segment, as []AbortedTxn) error {
	files := []struct {
		suffix string
		data   []byte
	}{
		{indexSuffix, append(indexHeader(offsetIndexMagic, ns.base), ns.ix.oidx.b...)},
		{timeIndexSuffix, append(indexHeader(timeIndexMagic, ns.base), ns.ix.tidx.b...)},
	}
	if len(as) > 0 {
		files = append(files, struct {
			suffix string
			data   []byte
		}{txnIndexSuffix, encodeTxnIndex(ns.base, as)})
	}
	for _, x := range files {
		name := ns.path(x.suffix) + cleanedSuffix
		if err := vfs.WriteFileSynced(l.fs, name, x.data); err != nil {
			return storageErr("write "+name, err)
		}
	}
	return nil
}

// removeCleaned removes the .cleaned files of base (best effort: open
// removes leftovers).
func (l *Log) removeCleaned(base int64) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		_ = l.fs.Remove(filepath.Join(l.dir, segmentName(base, suf)+cleanedSuffix))
	}
}

// swapGroup commits and performs the swap of old for ns (nil data when
// newBase is -1); kept are the group's aborted-index entries that stay (the
// others are dropped from memory at the switch). It returns the number of
// entries dropped. See the comment at the top of the file.
func (l *Log) swapGroup(old []*segment, ns *segment, newBase int64, kept []AbortedTxn) (int, error) {
	// Retention and DeleteRecords wait (they take metaMu first).
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	// The group must still be in the log, unchanged.
	segs := l.segments()
	at := -1
	for i, s := range segs {
		if s == old[0] {
			at = i
			break
		}
	}
	if at < 0 || at+len(old) >= len(segs) {
		l.removeCleaned(old[0].base)
		return 0, errCleanAborted
	}
	for k, s := range old {
		if segs[at+k] != s {
			l.removeCleaned(old[0].base)
			return 0, errCleanAborted
		}
	}
	bases := make([]int64, len(old))
	for k, s := range old {
		bases[k] = s.base
	}
	// Pin the old segments' indexes in memory: their files are about to be
	// replaced, and a reader still holding one must not load the new ones.
	// closed=false keeps unloadIndexes away from them (it unloads closed
	// segments only); they are never appended to.
	for _, s := range old {
		s.mu.Lock()
		s.closed = false
		s.mu.Unlock()
		if err := l.ensureIndex(s); err != nil {
			l.unpin(old)
			l.removeCleaned(old[0].base)
			return 0, err
		}
	}
	// 2. Commit point.
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, cleanSwapFile), encodeCleanSwap(newBase, bases)); err != nil {
		l.unpin(old)
		l.removeCleaned(old[0].base)
		return 0, storageErr("write clean-swap", err)
	}
	// 3. In memory. The new segment stays pinned (closed=false) until its
	// files have their final names.
	if newBase >= 0 {
		ns.mu.Lock()
		ns.closed = false
		ns.mu.Unlock()
	}
	l.mu.Lock()
	l.segsMu.Lock()
	cur := l.segs
	repl := make([]*segment, 0, len(cur)-len(old)+1)
	repl = append(repl, cur[:at]...)
	if newBase >= 0 {
		repl = append(repl, ns)
	}
	repl = append(repl, cur[at+len(old):]...)
	l.segs = repl
	first := l.segs[0].base
	l.segsMu.Unlock()
	// The aborted index loses the group's entries whose data is gone (the
	// new .txnindex holds only kept ones).
	pruned := l.ps.pruneAborted(bases[0], cur[at+len(old)].base, kept)
	if at == 0 {
		for {
			c := l.logStart.Load()
			if c >= first || l.logStart.CompareAndSwap(c, first) {
				break
			}
		}
	}
	l.mu.Unlock()
	// Readers holding an old segment keep reading its open file; the
	// files are removed below, so release must not remove them again.
	for _, s := range old {
		s.release(l)
	}
	// 4-6. On disk. An error here leaves the swap committed: open
	// finishes it.
	err := l.finishSwap(newBase, bases)
	if newBase >= 0 {
		ns.mu.Lock()
		ns.closed = true
		ns.lastUse.Store(l.useTick.Add(1))
		ns.mu.Unlock()
	}
	if err != nil {
		return pruned, storageErr("finish clean swap", err)
	}
	return pruned, nil
}

// unpin undoes the pinning of segments that stay in the log.
func (l *Log) unpin(segs []*segment) {
	for _, s := range segs {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}
}

// finishSwap performs steps 4-6 (idempotent: open redoes them after a
// crash).
func (l *Log) finishSwap(newBase int64, bases []int64) error {
	cleanedLog := filepath.Join(l.dir, segmentName(newBase, logSuffix)+cleanedSuffix)
	if newBase < 0 || exists(l, cleanedLog) {
		// 4. Remove the replaced segments, .log first.
		for _, b := range bases {
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if err := l.fs.Remove(filepath.Join(l.dir, segmentName(b, suf))); err != nil && !isNotExist(err) {
					return err
				}
			}
		}
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return err
		}
	}
	if newBase >= 0 {
		// 5. Final names, the .log last.
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
			name := filepath.Join(l.dir, segmentName(newBase, suf))
			if err := l.fs.Rename(name+cleanedSuffix, name); err != nil && !isNotExist(err) {
				return err
			}
		}
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return err
		}
	}
	// 6.
	if err := l.fs.Remove(filepath.Join(l.dir, cleanSwapFile)); err != nil && !isNotExist(err) {
		return err
	}
	return vfs.SyncDir(l.fs, l.dir)
}

func exists(l *Log, name string) bool {
	_, err := l.fs.Stat(name)
	return err == nil
}

// recoverCleanSwap completes or rolls back an interrupted swap; it runs
// first in Open.
func (l *Log) recoverCleanSwap() error {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, cleanSwapFile))
	switch {
	case err == nil:
		newBase, bases, derr := decodeCleanSwap(b)
		if derr != nil {
			// Written atomically: damage is media corruption. The old
			// segments may be gone already, so refuse to guess.
			return &CorruptionError{Segment: cleanSwapFile, Reason: derr.Error()}
		}
		l.logger.Warn("completing an interrupted compaction swap", "new_base", newBase, "replaced", len(bases))
		if err := l.finishSwap(newBase, bases); err != nil {
			return storageErr("complete clean swap", err)
		}
	case isNotExist(err):
	default:
		return storageErr("read clean-swap", err)
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return storageErr("list log dir", err)
	}
	removed := false
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !isNotExist(err) {
				return storageErr("remove "+n, err)
			}
			removed = true
		}
	}
	if removed {
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return storageErr("sync log dir", err)
		}
	}
	return nil
}

package log

import "github.com/weirhq/weir/vfs"

// Creating a partition.
//
// Open of a directory that does not exist creates an empty partition:
//
//	mkdir <dir>                                   (parent must exist, or is created durably)
//	create <dir>/00000000000000000000.log         empty
//	create <dir>/00000000000000000000.index       header only, not synced
//	create <dir>/00000000000000000000.timeindex   header only, not synced
//	fsync <dir>                                   the three entries are durable
//	fsync <parent>                                <dir> is durable
//
// Two fsyncs, and no recovery-point file. Crash safety at every step:
//   - Before the parent's fsync returns, the directory may be gone after a
//     crash, or present with any subset of its files. Nothing refers to it
//     yet (Open has not returned; the broker records a partition only after
//     its Open returned), and a later Open of what is left yields the same
//     empty partition: a missing directory goes through this path again, an
//     empty one gets its segment created, a lone index file is an orphan
//     and removed.
//   - Once Open returned, the directory and its segment files are durable,
//     so the first durable append (which fsyncs the .log file only) is
//     found after a crash.
//   - The index headers need no fsync of their own: an index file is
//     trusted only below a recovery point, and every recovery point is
//     written after flushIndexes has fsynced both index files. Until the
//     first one, recovery finds no recovery point and scans the segment
//     from 0 (an empty segment: nothing) and recreates the index files.
//   - The absent recovery point equals the one Open would write (segment
//     0, position 0, offset 0): lastCkpt records it as written but not
//     clean, so the periodic checkpoint writes nothing until data arrives
//     and Close writes the clean one.

// createIfMissing creates the partition directory with an empty segment
// and finishes the open if the directory does not exist. It reports
// whether it did; false means the directory exists and recover goes on.
// A failure removes the directory again (best effort: one left behind
// opens as an empty partition).
func (l *Log) createIfMissing() (created bool, err error) {
	if _, err := l.fs.Stat(l.dir); err == nil {
		return false, nil
	} else if !isNotExist(err) {
		return false, storageErr("stat log dir", err)
	}
	parent := parentDir(l.dir)
	if err := vfs.MkdirAllDurable(l.fs, parent); err != nil {
		return false, storageErr("create parent of log dir", err)
	}
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return false, storageErr("create log dir", err)
	}
	seg, err := l.createEmptySegment(0)
	if err != nil {
		_ = l.fs.RemoveAll(l.dir)
		return false, err
	}
	if err = vfs.SyncDir(l.fs, l.dir); err != nil {
		err = storageErr("sync log dir", err)
	} else if err = vfs.SyncDir(l.fs, parent); err != nil {
		err = storageErr("sync parent of log dir", err)
	}
	if err != nil {
		seg.closeFiles()
		_ = l.fs.RemoveAll(l.dir)
		return false, err
	}
	l.segs = []*segment{seg}
	if err := l.finishOpen(seg, 0, 0, false); err != nil {
		return false, err
	}
	l.ckptFileMu.Lock()
	l.lastCkpt.clean = false // no file yet: Close writes the clean one
	l.ckptFileMu.Unlock()
	return true, nil
}

// createEmptySegment creates the files of an empty active segment in a new
// directory without fsyncing them: the caller fsyncs the directory. On
// failure what was created is left to the caller's cleanup (a new
// directory that is not yet durable, or removed with it).
func (l *Log) createEmptySegment(base int64) (*segment, error) {
	seg := &segment{base: base, fs: l.fs, dir: l.dir, ix: newIndexState(base), maxTsKnown: true, loaded: true}
	seg.rollMs = l.now().UnixMilli()
	seg.refs.Store(1)
	fail := func(op string, err error) (*segment, error) {
		seg.closeFiles()
		return nil, storageErr(op+" "+seg.name(), err)
	}
	var err error
	if seg.f, err = l.fs.Create(seg.path(logSuffix)); err != nil {
		return fail("create", err)
	}
	for _, ix := range []struct {
		f      *vfs.File
		suffix string
		magic  string
	}{{&seg.oFile, indexSuffix, offsetIndexMagic}, {&seg.tFile, timeIndexSuffix, timeIndexMagic}} {
		f, err := l.fs.Create(seg.path(ix.suffix))
		if err != nil {
			return fail("create index of", err)
		}
		*ix.f = f
		if _, err := f.WriteAt(indexHeader(ix.magic, base), 0); err != nil {
			return fail("write index header of", err)
		}
	}
	return seg, nil
}

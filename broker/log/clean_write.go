package log

import "github.com/weirhq/weir/vfs"

// cleanWriteBackLag is how much of the cleaned segment's writeback may be in
// flight: the cleaner waits only for pieces this far behind the one it
// writes, which a disk keeping up has finished already.
const cleanWriteBackLag = 1 << 20

// cleanBufs are a pass's reusable buffers: after the first segment a pass
// allocates nothing per batch or per record.
type cleanBufs struct {
	read    []byte // the segment scanner's buffer
	scratch []byte // a re-encoded batch (filterBatch)
	write   []byte // the output writer's pending piece
}

// cleanWriter writes a cleaned segment's data in pieces of cleanIOChunk
// bytes, paced by the throttle, and starts each piece's writeback as it
// goes (writeBack, at most cleanWriteBackLag in flight) so that the fdatasync before the swap has little left
// to flush. Where writeBack is unavailable (no OS descriptor, other
// systems) it fdatasyncs every cleanSyncEvery bytes instead.
//
// Invariant: the file holds, at [0, pos-len(buf)), every byte added, and
// buf the rest; sync makes all of [0, pos) durable.
type cleanWriter struct {
	f    vfs.File
	name string
	thr  *throttle
	buf  []byte
	pos  int64 // bytes added
	// written counts the bytes written to f; unsynced those not yet synced
	// or written back.
	written, unsynced int64
	noWriteBack       bool // writeBack reported it is unsupported
}

func newCleanWriter(f vfs.File, name string, thr *throttle, buf []byte) *cleanWriter {
	if cap(buf) < cleanIOChunk {
		buf = make([]byte, 0, cleanIOChunk)
	}
	return &cleanWriter{f: f, name: name, thr: thr, buf: buf[:0]}
}

// add appends batch p to the segment.
func (w *cleanWriter) add(p []byte) error {
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(p) > cap(w.buf) {
		// Larger than a piece: written on its own.
		w.pos += int64(len(p))
		return w.write(p, w.pos-int64(len(p)))
	}
	w.buf = append(w.buf, p...)
	w.pos += int64(len(p))
	return nil
}

// flush writes the pending piece.
func (w *cleanWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.write(w.buf, w.pos-int64(len(w.buf)))
	w.buf = w.buf[:0]
	return err
}

// write writes p at off, then writes it back (or syncs periodically).
func (w *cleanWriter) write(p []byte, off int64) error {
	if _, err := w.f.WriteAt(p, off); err != nil {
		return storageErr("write "+w.name, err)
	}
	w.written += int64(len(p))
	w.unsynced += int64(len(p))
	if !w.noWriteBack {
		ok, err := writeBack(w.f, off, int64(len(p)), off-cleanWriteBackLag)
		if err != nil {
			return storageErr("write back "+w.name, err)
		}
		if ok {
			w.unsynced = 0
		} else {
			w.noWriteBack = true
		}
	}
	if w.unsynced >= cleanSyncEvery {
		// A large fsync at the end would queue ahead of the appenders'
		// group-commit fsyncs on the same disk.
		w.unsynced = 0
		if err := w.f.Sync(); err != nil {
			return storageErr("sync "+w.name, err)
		}
	}
	w.thr.wait(int64(len(p)))
	return nil
}

// sync flushes and fdatasyncs the segment.
func (w *cleanWriter) sync() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return storageErr("sync "+w.name, err)
	}
	w.unsynced = 0
	return nil
}

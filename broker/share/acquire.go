package share

import (
	"time"

	wlog "github.com/weirhq/weir/broker/log"
)

// acquiredRange is a run of offsets acquired with one delivery count.
type acquiredRange struct {
	first, last int64
	count       int16
}

// acquireLimits bound one acquisition.
type acquireLimits struct {
	maxRecords int   // records to acquire at most (batch-optimised: may finish the batch)
	maxBytes   int   // bytes of batches to read
	strict     bool  // record-limit mode (KIP-1206): never more than maxRecords
	window     int   // max records in flight (group.share.partition.max.record.locks)
	limit      int16 // delivery count limit: an available record delivered this often is archived
	committed  bool  // read_committed: up to the last stable offset, aborted records archived
}

// acquire locks available records of p for member until deadline: first
// the released ones in the in-flight window, then records past its end, up
// to the log's high watermark. It returns the whole batches holding them
// (copied: valid after the read is released) and the acquired ranges.
// Control batches, offsets missing from the log (compacted away) and, under
// read_committed, aborted transactions' records in its way are archived:
// they are never delivered. Under read_committed nothing at or past the
// last stable offset is acquired. changed reports a state
// change to persist. Lock must be held.
func (p *sharePartition) acquire(l PartitionLog, member string, deadline time.Time, lim acquireLimits) (data []byte, ranges []acquiredRange, changed bool, err error) {
	if p.moveStart(l.LogStartOffset()) {
		changed = true
	}
	hw := l.HighWatermark()
	if lim.committed {
		hw = min(hw, l.LastStableOffset())
	}
	from := p.end()
	for i := range p.recs {
		if p.recs[i].state == stAvailable {
			from = p.start + int64(i)
			break
		}
	}
	if from >= hw || (from == p.end() && len(p.recs) >= lim.window) {
		return nil, nil, changed, nil
	}
	maxBytes := lim.maxBytes
	if maxBytes <= 0 {
		maxBytes = 1
	}
	rr, err := l.Read(from, maxBytes, hw)
	if err != nil {
		return nil, nil, changed, err
	}
	defer rr.Release()
	var aborted []wlog.AbortedTxn
	if lim.committed {
		aborted = l.AbortedTransactions(from, hw)
	}
	// skip: never delivered (a transaction marker, or an aborted
	// transaction's records under read_committed).
	skip := func(h wlog.BatchHeader) bool {
		if h.Control() {
			return true
		}
		if !h.Transactional() {
			return false
		}
		for _, a := range aborted {
			if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
				return true
			}
		}
		return false
	}

	took := 0
	cursor := from
	// take records offset o in state r: acquired for member.
	take := func(r *inflight, o int64) {
		r.state, r.member, r.deadline = stAcquired, member, deadline
		r.count++
		took++
		if n := len(ranges); n > 0 && ranges[n-1].last == o-1 && ranges[n-1].count == r.count {
			ranges[n-1].last = o
		} else {
			ranges = append(ranges, acquiredRange{o, o, r.count})
		}
	}
	// archive marks o (not a deliverable record) done if it is in or at
	// the end of the window; false when the window is full.
	archive := func(o int64) bool {
		if o < p.end() {
			if r := p.at(o); r.state == stAvailable {
				r.state = stArchived
				changed = true
			}
			return true
		}
		if len(p.recs) >= lim.window {
			return false
		}
		p.recs = append(p.recs, inflight{state: stArchived})
		changed = true
		return true
	}
	buf := rr.Data
walk:
	for len(buf) > 0 {
		h, ok := wlog.ReadBatchHeader(buf)
		if !ok || h.Size() < wlog.BatchHeaderSize || h.Size() > int64(len(buf)) {
			break
		}
		batch := buf[:h.Size()]
		buf = buf[h.Size():]
		first, last := h.BaseOffset, h.LastOffset()
		if last < cursor {
			continue
		}
		for ; cursor < first; cursor++ { // a hole: compacted away
			if !archive(cursor) {
				break walk
			}
		}
		tookHere := false
		for o := max(cursor, first); o <= last; o++ {
			cursor = o + 1
			if skip(h) {
				if !archive(o) {
					break walk
				}
				continue
			}
			if o < p.end() {
				if r := p.at(o); r.state == stAvailable {
					if r.count >= lim.limit { // the limit was lowered since
						r.state = stArchived
						changed = true
						continue
					}
					take(r, o)
					tookHere = true
				}
			} else {
				if len(p.recs) >= lim.window {
					cursor = o
					break
				}
				p.recs = append(p.recs, inflight{})
				take(&p.recs[len(p.recs)-1], o)
				tookHere = true
			}
			if lim.strict && took >= lim.maxRecords {
				break
			}
		}
		if tookHere {
			data = append(data, batch...)
			changed = true
		}
		if took >= lim.maxRecords || (cursor > last && len(p.recs) >= lim.window && cursor >= p.end()) {
			break
		}
		if cursor <= last { // stopped inside the batch
			break
		}
	}
	if p.settle() {
		changed = true
	}
	return data, ranges, changed, nil
}

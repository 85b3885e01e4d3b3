package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// Each store's largest update time ever written, and a key written with it,
// are kept in the meta key "maxts/<store>":
//
//	ts u64 BE (encoded as in the data value) | key
//
// writeBatch updates it in the same batch as the data when a write's time
// exceeds it, so it is an upper bound of every key's time in the store
// (deletes do not lower it). MaxTS then costs one data read when that key
// still holds that time (the bound is the maximum), instead of reading every
// key of the index's last bucket: with coarse buckets that can be every key
// of the store (a restore's MaxTS after loading 100k keys in one bucket).
const metaMaxTSPrefix = "maxts/"

func maxTSKey(store string) []byte { return metaKey(metaMaxTSPrefix + store) }

// maxTSState is a store's persisted bound as this DB last read or wrote it.
type maxTSState struct {
	ts  int64
	key string
	// present: the meta key exists (ts, key valid). trusted: the bound
	// covers every key (false if the store has data but no readable
	// record: then it is never written and MaxTS reads the index).
	present, trusted bool
}

// maxTSOf returns store's bound, reading it the first time.
func (d *DB) maxTSOf(store string) (*maxTSState, error) {
	if st, ok := d.maxTS[store]; ok {
		return st, nil
	}
	st := &maxTSState{}
	v, err := d.getMeta(metaMaxTSPrefix + store)
	if err != nil {
		return nil, err
	}
	if ts, key, ok := decodeMaxTSValue(v); ok {
		st.ts, st.key, st.present, st.trusted = ts, key, true, true
	} else {
		// Absent (or unreadable): a bound only if the store is empty.
		empty, err := d.storeEmpty(store)
		if err != nil {
			return nil, err
		}
		st.trusted = empty
		if v != nil {
			d.log.Warn("state: unreadable max time record; MaxTS reads the index", "store", store)
			st.trusted = false
		}
	}
	d.maxTS[store] = st
	return st, nil
}

// maxTSUpdate is a bound raised by a batch: applied to the DB's view once the
// batch is committed.
type maxTSUpdate struct {
	st         *maxTSState
	store, key string // parts of the write's data key
	ts         int64
}

// appendMaxTSValue appends the encoded record of (ts, key).
func appendMaxTSValue(dst []byte, ts int64, key string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, encodeTS(ts))
	return append(dst, key...)
}

// decodeMaxTSValue decodes what appendMaxTSValue wrote; ok is false for
// anything shorter than the time (nil: no record).
func decodeMaxTSValue(v []byte) (ts int64, key string, ok bool) {
	if len(v) < 8 {
		return 0, "", false
	}
	return decodeTS(v), string(v[8:]), true
}

// boundedMaxTS answers MaxTS from the persisted bound when the key written
// with it still holds it; ok is false when the index must be read.
func (d *DB) boundedMaxTS(store string) (ts int64, ok bool, err error) {
	st, err := d.maxTSOf(store)
	if err != nil || !st.trusted || !st.present {
		return 0, false, err
	}
	d.dkBuf = dataKey(d.dkBuf[:0], store, []byte(st.key))
	v, closer, err := d.db.Get(d.dkBuf)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("state max time %s: %w", store, err)
	}
	defer closer.Close()
	if len(v) < 8 || decodeTS(v) != st.ts {
		return 0, false, nil
	}
	return st.ts, true, nil
}

// noMaxTS marks a run with no write holding a value.
const noMaxTS = math.MinInt64

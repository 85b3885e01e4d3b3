package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Reads for queries from other goroutines than the task's (queryable
// state). Pebble serves reads concurrently with writes, so these may run
// while the task writes; they see the writes committed to the database so
// far (a round's writes once flushed; under ExactlyOnce once its transaction
// committed). They must not overlap Close or Wipe: the caller excludes that.

// Get returns key's value and last update time (ms) in store, or found false.
// The returned value is a copy.
func (d *DB) Get(store string, key []byte) (value []byte, ts int64, found bool, err error) {
	v, closer, err := d.db.Get(dataKey(nil, store, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("state get %s: %w", store, err)
	}
	defer closer.Close()
	if len(v) < 8 {
		return nil, 0, false, &CorruptionError{Store: store, Key: append([]byte(nil), key...), Reason: "value shorter than its timestamp"}
	}
	return append([]byte(nil), v[8:]...), decodeTS(v), true, nil
}

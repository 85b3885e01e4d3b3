package stream

import (
	"errors"
	"fmt"
	"time"
)

// A global table's store answers queries from this instance's replica on
// every instance: Get, Range and KeyMetadata never route to another
// instance for it, its entries carry Partition -1, and the HTTP API lists
// it with "global": true. What an instance answers is what it has consumed
// of the table's topic so far (as GlobalTable.Get), so two instances may
// briefly answer differently while one of them lags.

// globalStore returns the global table whose store is named store, or nil.
func (a *App) globalStore(store string) *globalSpec {
	for _, g := range a.b.globals {
		if g.store == store {
			return g
		}
	}
	return nil
}

// isGlobalStore reports whether store is a global table's.
func (a *App) isGlobalStore(store string) bool { return a.globalStore(store) != nil }

// loadedGlobals is the instance's global tables' state, or ErrNotRunning
// (retriable) before Run has restored them.
func (a *App) loadedGlobals(store string) (*globalState, error) {
	gs := a.globalsLoaded()
	if gs == nil {
		return nil, fmt.Errorf("%w: global table store %s is not loaded yet", ErrNotRunning, store)
	}
	return gs, nil
}

// getGlobal answers Get for a global table's store from the local replica.
func (a *App) getGlobal(store string, key []byte) (StoreEntry, bool, error) {
	gs, err := a.loadedGlobals(store)
	if err != nil {
		return StoreEntry{}, false, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	v, ts, found, err := gs.db.Get(store, key)
	if err != nil || !found {
		return StoreEntry{}, false, err
	}
	return StoreEntry{Key: append([]byte(nil), key...), Value: v, Timestamp: time.UnixMilli(ts), Partition: -1}, true, nil
}

// rangeGlobal answers Range for a global table's store from the local
// replica: at most limit entries of [from, to) in encoded-key order.
func (a *App) rangeGlobal(store string, from, to []byte, limit int) ([]StoreEntry, error) {
	gs, err := a.loadedGlobals(store)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultRangeLimit
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var out []StoreEntry
	err = gs.db.ReadScan(store, from, to, func(k, v []byte, ts int64) error {
		if len(out) >= limit {
			return errStopScan
		}
		out = append(out, StoreEntry{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...),
			Timestamp: time.UnixMilli(ts), Partition: -1})
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return out, err
}

// querySpec is the store description the HTTP API uses for a global
// table's store: its codecs, so that keys parse and entries decode as for
// any other store.
func (g *globalSpec) querySpec() *storeSpec {
	return &storeSpec{name: g.store, table: true, codecs: g.codecs, op: "global table " + g.topic}
}

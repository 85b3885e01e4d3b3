package stream

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// WindowStore is a typed window store of Process operators (Kafka Streams'
// WindowStore): values per (key, window [start, end)), one key's windows
// read in order of end, then start. Declare it with KeyValueWindowStore,
// list it in ProcessConfig.Stores, and use it from the handlers with the
// context they were given. A window's update time (for the store's TTL) is
// its end: a window is removed once the task's stream time is TTL past its
// end — declare TTL as the window size plus the allowed lateness (or
// NoExpiry with its reason).
type WindowStore[K, V any] struct {
	decl  procStoreDecl
	key   Codec[K]
	value Codec[V]
}

// WindowEntry is one window of a key and its value.
type WindowEntry[V any] struct {
	Start, End time.Time
	Value      V
}

// KeyValueWindowStore declares a typed window store for Process; codecs and
// bound as for KeyValueStore.
func KeyValueWindowStore[K, V any](cfg StoreConfig, opts ...CodecOpt[K, V]) *WindowStore[K, V] {
	kv := KeyValueStore(cfg, opts...)
	s := &WindowStore[K, V]{decl: kv.decl, key: kv.key, value: kv.value}
	s.decl.codecs = nil // keys are window keys: not queryable by the record key
	s.decl.window = true
	return s
}

func (s *WindowStore[K, V]) processStore() *procStoreDecl { return &s.decl }

// Name returns the store's name.
func (s *WindowStore[K, V]) Name() string { return s.decl.cfg.Name }

func (s *WindowStore[K, V]) windowKey(a StoreAccess, key K, start, end time.Time) (*taskStore, []byte, error) {
	st, err := storeHandle(a, &s.decl)
	if err != nil {
		return nil, nil, err
	}
	if end.Before(start) {
		return nil, nil, fmt.Errorf("store %s: window ends (%v) before it starts (%v)", st.spec.name, end, start)
	}
	kb, err := s.key.Encode(key)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: encode key: %w", st.spec.name, err)
	}
	return st, timekey.WindowKey(nil, kb, start.UnixMilli(), end.UnixMilli()), nil
}

// Put sets the value of key's window [start, end).
func (s *WindowStore[K, V]) Put(a StoreAccess, key K, start, end time.Time, v V) error {
	st, wk, err := s.windowKey(a, key, start, end)
	if err != nil {
		return err
	}
	vb, err := s.value.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", st.spec.name, err)
	}
	a.processCore().windowWritten(st, wk)
	return a.processCore().put(st, wk, vb, end)
}

// Get returns the value of key's window [start, end) (found false: absent).
func (s *WindowStore[K, V]) Get(a StoreAccess, key K, start, end time.Time) (v V, found bool, err error) {
	st, wk, err := s.windowKey(a, key, start, end)
	if err != nil {
		return v, false, err
	}
	b, found, err := st.get(wk)
	if err != nil || !found {
		return v, false, err
	}
	if v, err = s.value.Decode(b); err != nil {
		return v, false, fmt.Errorf("store %s: decode stored value: %w", st.spec.name, err)
	}
	return v, true, nil
}

// Delete removes key's window [start, end).
func (s *WindowStore[K, V]) Delete(a StoreAccess, key K, start, end time.Time) error {
	st, wk, err := s.windowKey(a, key, start, end)
	if err != nil {
		return err
	}
	a.processCore().windowWritten(st, wk)
	return a.processCore().delete(st, wk, a.processCore().meta.Timestamp)
}

// Fetch returns key's windows that overlap [from, to) (end > from and start
// < to), in order of end, then start; the writes of the record being
// handled included.
func (s *WindowStore[K, V]) Fetch(a StoreAccess, key K, from, to time.Time) ([]WindowEntry[V], error) {
	st, err := storeHandle(a, &s.decl)
	if err != nil {
		return nil, err
	}
	kb, err := s.key.Encode(key)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", st.spec.name, err)
	}
	fromMs, toMs := from.UnixMilli(), to.UnixMilli()
	minEnd := fromMs
	if minEnd < math.MaxInt64 {
		minEnd++
	}
	lo, hi := timekey.KeyWindows(kb, minEnd)
	keys, err := a.processCore().windowCandidates(st, lo, hi)
	if err != nil {
		return nil, err
	}
	var out []WindowEntry[V]
	for _, k := range keys {
		_, start, end, err := timekey.ParseWindowKey(k)
		if err != nil {
			return nil, &fatalError{fmt.Errorf("store %s: %w", st.spec.name, err)}
		}
		if start >= toMs {
			continue
		}
		b, found, err := st.get(k)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		v, err := s.value.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("store %s: decode stored value: %w", st.spec.name, err)
		}
		out = append(out, WindowEntry[V]{Start: time.UnixMilli(start), End: time.UnixMilli(end), Value: v})
	}
	return out, nil
}

// storeHandle returns the task's handle on a store the processor declared.
func storeHandle(a StoreAccess, d *procStoreDecl) (*taskStore, error) {
	if a == nil {
		return nil, fmt.Errorf("store %s: nil context", d.cfg.Name)
	}
	st := a.processCore().stores[d.cfg.Name]
	if st == nil {
		return nil, fmt.Errorf("store %s: not declared in this processor's ProcessConfig.Stores", d.cfg.Name)
	}
	return st, nil
}

// windowDirty is the memory of the window keys written in the task's open
// state.Txn, which a database scan does not see (as for timers, see
// process_timers.go): dropped when the Txn ends (task.txnGen moves).
type windowDirty struct {
	gen  uint64
	keys map[string]struct{}
}

func (c *procCore) dirtyOf(st *taskStore) *windowDirty {
	if c.windows == nil {
		c.windows = map[string]*windowDirty{}
	}
	d := c.windows[st.spec.name]
	if d == nil {
		d = &windowDirty{gen: c.t.txnGen, keys: map[string]struct{}{}}
		c.windows[st.spec.name] = d
	}
	if d.gen != c.t.txnGen {
		d.gen = c.t.txnGen
		clear(d.keys)
	}
	return d
}

// windowWritten remembers a window key written (or deleted) in the open Txn.
func (c *procCore) windowWritten(st *taskStore, wk []byte) {
	c.dirtyOf(st).keys[string(wk)] = struct{}{}
}

// windowCandidates returns the window keys in [lo, hi) the database holds
// or the open Txn wrote, sorted and distinct; each still to be checked
// against the Txn (it may have deleted them).
func (c *procCore) windowCandidates(st *taskStore, lo, hi []byte) ([][]byte, error) {
	var keys [][]byte
	err := c.t.db.Scan(st.spec.name, lo, hi, func(k, _ []byte, _ int64) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return nil, &fatalError{fmt.Errorf("task %s: store %s: %w", c.t.id, st.spec.name, err)}
	}
	// Compared as strings: only the keys in range are copied (the dirty
	// set holds every window key the open Txn wrote, in any key's range).
	los, his := string(lo), string(hi)
	for k := range c.dirtyOf(st).keys {
		if k >= los && k < his {
			keys = append(keys, []byte(k))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal), nil
}

package stream

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The collapsed changelog of a Process operator's stores (process.go):
// key-value, window and timer stores write one changelog record per key
// per flush, none for a key created and deleted between two flushes; an
// abort drops what was collapsed; a restore gives every store the state of
// the last flush.

// procLogTopology is a Process over "in" with a key-value store "kv" (a
// count per key), a window store "win" (a count per key and 10 s window)
// and an event-time timer "t" an hour after each record (moved by every
// record, never due here). A record "d" deletes the key's count, window
// and timer instead.
func procLogTopology(b *Builder) {
	kv := KeyValueStore[string, int64](StoreConfig{Name: "kv", TTL: 24 * time.Hour})
	ws := KeyValueWindowStore[string, int64](StoreConfig{Name: "win", TTL: 24 * time.Hour})
	Process(From(b, "in", String(), String()), ProcessConfig{Name: "p", Stores: []ProcessStore{kv, ws}},
		Processor[string, string, string, string]{
			OnRecord: func(c *ProcessContext[string, string, string], r Record[string, string]) error {
				start := r.Timestamp.Truncate(10 * time.Second)
				end := start.Add(10 * time.Second)
				if r.Value == "d" {
					if err := kv.Delete(c, r.Key); err != nil {
						return err
					}
					if err := ws.Delete(c, r.Key, start, end); err != nil {
						return err
					}
					return c.DeleteEventTimer(r.Key, "t")
				}
				n, _, err := kv.Get(c, r.Key)
				if err != nil {
					return err
				}
				if err := kv.Put(c, r.Key, n+1); err != nil {
					return err
				}
				w, _, err := ws.Get(c, r.Key, start, end)
				if err != nil {
					return err
				}
				if err := ws.Put(c, r.Key, start, end, w+1); err != nil {
					return err
				}
				return c.SetEventTimer(r.Key, "t", r.Timestamp.Add(time.Hour))
			},
			OnTimer: func(*ProcessContext[string, string, string], Timer[string]) error { return nil },
		}).To("out", String(), String())
}

// The changelog topics of procLogTopology's stores.
var procLogChangelogs = []string{"proc-kv-changelog", "proc-win-changelog", "proc-p-timers-changelog"}

// procLogRun drives the task of procLogTopology as an App does, commits
// explicit: its tables (the collapsed changelogs) flush only at a commit.
// Records produced since the last commit are open; a commit makes them
// done, an abort (ExactlyOnce) drops them. start restores a new task from
// the done changelog records.
type procLogRun struct {
	t          *testing.T
	g          Guarantee
	dir        string
	tk         *task
	open, done []*kgo.Record
	off, ts    int64
}

func newProcLogRun(t *testing.T, g Guarantee) *procLogRun {
	r := &procLogRun{t: t, g: g, dir: t.TempDir(), ts: t0.UnixMilli()}
	r.start()
	t.Cleanup(func() { r.tk.close() })
	return r
}

func (r *procLogRun) start() {
	r.t.Helper()
	bl := NewBuilder()
	procLogTopology(bl)
	a, err := NewApp("proc", bl, Brokers("127.0.0.1:1"), StateDir(r.dir), captureInto(&r.open), Delivery(r.g))
	if err != nil {
		r.t.Fatal(err)
	}
	if r.tk, err = a.newTask(taskID{sub: 0, partition: 0}); err != nil {
		r.t.Fatal(err)
	}
	r.tk.tablesAtCommit = true
	restoreFrom(r.t, r.tk, r.done)
	if r.g == ExactlyOnce {
		r.tk.beginRound()
	}
}

// round handles a record per "key=value" (value "p" or "d"), one
// millisecond apart, and ends the round.
func (r *procLogRun) round(kvs ...string) {
	r.t.Helper()
	for _, s := range kvs {
		k, v := s[:len(s)-2], s[len(s)-1:]
		kr := &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte(v), Offset: r.off, Timestamp: time.UnixMilli(r.ts)}
		r.off++
		r.ts++
		if err := r.tk.handle(context.Background(), kr); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.tk.endBatch(); err != nil {
		r.t.Fatal(err)
	}
	if r.g == AtLeastOnce {
		if err := r.tk.flushState(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// commit flushes the tables and commits (ExactlyOnce: the transaction,
// then the next one begins).
func (r *procLogRun) commit() {
	r.t.Helper()
	if err := flushTablesForCommit([]*task{r.tk}, r.g == AtLeastOnce); err != nil {
		r.t.Fatal(err)
	}
	if err := r.tk.flushState(); err != nil {
		r.t.Fatal(err)
	}
	r.done = append(r.done, r.open...)
	r.open = nil
	if r.g == ExactlyOnce {
		r.tk.beginRound()
	}
}

// abort aborts the open transaction (ExactlyOnce).
func (r *procLogRun) abort() {
	r.tk.abortRound()
	r.open = nil
	r.tk.beginRound()
}

// crash kills the task after its last commit, losing its local store:
// under at-least-once what it produced since stays (nothing waits for a
// commit), under ExactlyOnce the open transaction aborts. A new task
// restores from the changelog.
func (r *procLogRun) crash() {
	r.t.Helper()
	if r.g == AtLeastOnce {
		r.done = append(r.done, r.open...)
	}
	r.open = nil
	r.tk.close()
	r.start()
}

// changelog returns the done records of topic as "key=value" (a
// tombstone: "key=nil"; keys and values quoted).
func (r *procLogRun) changelog(topic string) []string {
	var out []string
	for _, kr := range r.done {
		if kr.Topic != topic {
			continue
		}
		v := "nil"
		if kr.Value != nil {
			v = fmt.Sprintf("%q", kr.Value)
		}
		out = append(out, fmt.Sprintf("%q=%s", kr.Key, v))
	}
	return out
}

// state returns every store's committed contents: "store key" ->
// "value@ts".
func (r *procLogRun) state() map[string]string {
	r.t.Helper()
	if err := r.tk.db.Flush(); err != nil {
		r.t.Fatal(err)
	}
	m := map[string]string{}
	for _, st := range r.tk.stores {
		err := r.tk.db.ReadScan(st.spec.name, nil, nil, func(k, v []byte, ts int64) error {
			m[fmt.Sprintf("%s %q", st.spec.name, k)] = fmt.Sprintf("%q@%d", v, ts)
			return nil
		})
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return m
}

// Between two flushes, a key of each store written many times gets one
// changelog record with its latest value; a key created and deleted gets
// none; a key whose value a flush logged gets a tombstone when deleted;
// a moved timer's records come in timerChangelogPhase's order; an aborted
// transaction's writes get none.
func TestProcessChangelogCollapsed(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			r := newProcLogRun(t, g)
			// Two rounds: a five times, b created and deleted, c once.
			r.round("a=p", "b=p", "a=p", "c=p", "a=p")
			r.round("a=p", "b=d", "a=p")
			if n := len(r.open); n != 0 {
				t.Fatalf("%d records before the commit, want none (collapsed until the flush)", n)
			}
			r.commit()
			count := func(v int64) string { return fmt.Sprintf("%q", int64Bytes(v)) }
			if got, want := r.changelog("proc-kv-changelog"), []string{`"a"=` + count(5), `"c"=` + count(1)}; !slices.Equal(got, want) {
				t.Errorf("kv changelog %v, want %v", got, want)
			}
			if got := r.changelog("proc-win-changelog"); len(got) != 2 {
				t.Errorf("win changelog %v, want a record for a's window and c's", got)
			}
			// A timer moved five times: its last entry and its index.
			if got := r.changelog("proc-p-timers-changelog"); len(got) != 4 {
				t.Errorf("timers changelog %v, want 4 records (a and c: the timer entry and its index)", got)
			}
			// c's timer moved: the new timer entry, then the index, then
			// the old entry's tombstone (timerChangelogPhase: every prefix
			// has each index entry's timer).
			before := len(r.done)
			r.round("c=p")
			r.commit()
			var kinds []string
			for _, kr := range r.done[before:] {
				switch {
				case kr.Topic != "proc-p-timers-changelog":
				case kr.Key[0] == 'x':
					kinds = append(kinds, "index")
				case kr.Value == nil:
					kinds = append(kinds, "timer-tombstone")
				default:
					kinds = append(kinds, "timer")
				}
			}
			if want := []string{"timer", "index", "timer-tombstone"}; !slices.Equal(kinds, want) {
				t.Errorf("timers changelog of a move %v, want %v", kinds, want)
			}
			// a, logged, is deleted: a tombstone per key of each store.
			before = len(r.done)
			r.round("a=d")
			r.commit()
			for _, topic := range procLogChangelogs {
				var got []string
				for _, kr := range r.done[before:] {
					if kr.Topic == topic {
						got = append(got, fmt.Sprintf("%q=%q", kr.Key, kr.Value))
						// a's keys: "a", or its escaped form in a window or timer key.
						ofA := string(kr.Key) == "a" || bytes.Contains(kr.Key, []byte("a\x00\x01"))
						if kr.Value != nil || !ofA {
							t.Errorf("%s: %s after a's deletion, want a's tombstones only", topic, got[len(got)-1])
						}
					}
				}
				want := 1 // kv: the key; win: its window
				if topic == "proc-p-timers-changelog" {
					want = 2 // the timer entry and its index
				}
				if len(got) != want {
					t.Errorf("%s: %d records after a's deletion, want %d tombstones: %v", topic, len(got), want, got)
				}
			}
			if g == ExactlyOnce {
				before = len(r.done)
				r.round("x=p", "a=p")
				r.abort()
				r.commit()
				if n := len(r.done) - before; n != 0 {
					t.Errorf("%d records after an aborted transaction's flush, want none", n)
				}
			}
		})
	}
}

// A task killed after a commit restores, from the changelog, its stores as
// they were at that commit (the last flush): the writes of the rounds
// since, collapsed and not flushed, are not in it (at-least-once: its
// input is processed again from the committed offset; ExactlyOnce: its
// transaction aborted). Processing that input again ends in the state of
// a run without the crash.
func TestProcessChangelogRestoreAfterCrash(t *testing.T) {
	phase1 := [][]string{{"a=p", "b=p", "a=p", "c=p"}, {"b=d", "d=p", "a=p"}}
	phase2 := [][]string{{"a=p", "c=d", "e=p"}, {"e=d", "b=p", "d=p", "d=p"}}
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			ref := newProcLogRun(t, g)
			r := newProcLogRun(t, g)
			for _, kvs := range phase1 {
				ref.round(kvs...)
				r.round(kvs...)
			}
			ref.commit()
			r.commit()
			atCommit := r.state()
			off, ts := r.off, r.ts
			for _, kvs := range phase2 {
				ref.round(kvs...)
				r.round(kvs...)
			}
			ref.commit()
			r.crash()
			if got := r.state(); !maps.Equal(got, atCommit) {
				t.Fatalf("restored state\n%v\nwant the state at the last commit\n%v", got, atCommit)
			}
			r.off, r.ts = off, ts // from the committed offset
			for _, kvs := range phase2 {
				r.round(kvs...)
			}
			r.commit()
			if got, want := r.state(), ref.state(); !maps.Equal(got, want) {
				t.Fatalf("state after the replay\n%v\nwant that of the run without a crash\n%v", got, want)
			}
		})
	}
}

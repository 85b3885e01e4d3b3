package stream

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// windowCounter counts each key's records per tumbling 10 s window in a
// window store and emits "<key>@<start>=<count>" when the watermark passes
// the window's end (an event-time timer named by the window's start),
// deleting the window. A record "ef" also forwards the key's windows as
// Fetch returns them, its own write included; "f" only forwards them.
func windowCounter(b *Builder) {
	ws := KeyValueWindowStore[string, int64](StoreConfig{Name: "per-window", TTL: time.Minute})
	src := From(b, "events", String(), String())
	Process(src, ProcessConfig{Name: "windows", Stores: []ProcessStore{ws}},
		Processor[string, string, string, string]{
			OnRecord: func(c *ProcessContext[string, string, string], r Record[string, string]) error {
				fetch := func() error {
					es, err := ws.Fetch(c, r.Key, time.UnixMilli(0), time.UnixMilli(1<<50))
					if err != nil {
						return err
					}
					var parts []string
					for _, e := range es {
						parts = append(parts, fmt.Sprintf("%d-%d=%d", e.Start.UnixMilli(), e.End.UnixMilli(), e.Value))
					}
					return c.Forward(Record[string, string]{Key: r.Key, Value: r.Key + " fetch [" + strings.Join(parts, " ") + "]"})
				}
				if r.Value == "f" {
					return fetch()
				}
				start := r.Timestamp.Truncate(10 * time.Second)
				end := start.Add(10 * time.Second)
				n, _, err := ws.Get(c, r.Key, start, end)
				if err != nil {
					return err
				}
				if err := ws.Put(c, r.Key, start, end, n+1); err != nil {
					return err
				}
				if err := c.SetEventTimer(r.Key, fmt.Sprint(start.UnixMilli()), end); err != nil {
					return err
				}
				if r.Value == "ef" {
					return fetch()
				}
				return nil
			},
			OnTimer: func(c *ProcessContext[string, string, string], tm Timer[string]) error {
				end := tm.Time
				start := end.Add(-10 * time.Second)
				n, found, err := ws.Get(c, tm.Key, start, end)
				if err != nil || !found {
					return fmt.Errorf("window %v of %s: found %v: %v", start, tm.Key, found, err)
				}
				if err := ws.Delete(c, tm.Key, start, end); err != nil {
					return err
				}
				return c.Forward(Record[string, string]{Key: tm.Key, Value: fmt.Sprintf("%s@%d=%d", tm.Key, start.UnixMilli(), n)})
			},
		}).To("out", String(), String())
}

func TestProcessWindowStore(t *testing.T) {
	b := NewBuilder()
	windowCounter(b)
	d, err := NewDriver("win", b, nil, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipeKV(t, d, "events", "u", "e", 1000)
	pipeKV(t, d, "events", "v", "e", 1500)
	pipeKV(t, d, "events", "u", "e", 2000)
	pipeKV(t, d, "events", "u", "e", 9999)
	pipeKV(t, d, "events", "u", "ef", 10000) // the watermark (10000) closes [0, 10000) after this record
	want := []string{"u fetch [0-10000=3 10000-20000=1]", "u@0=3", "v@0=1"}
	if got := outValues(d, "out"); !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	pipeKV(t, d, "events", "u", "e", 25000) // closes [10000, 20000)
	pipeKV(t, d, "events", "u", "e", 26000)
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	pipeKV(t, d, "events", "u", "f", 26500)
	want = append(want, "u@10000=1", "u fetch [20000-30000=2]")
	if got := outValues(d, "out"); !slices.Equal(got, want) {
		t.Fatalf("outputs after the restart %v, want %v", got, want)
	}
	if err := d.EndOfInput(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "u@20000=2")
	if got := outValues(d, "out"); !slices.Equal(got, want) {
		t.Fatalf("outputs at the end %v, want %v", got, want)
	}
}

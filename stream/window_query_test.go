package stream

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/timekey"
)

// recordingTransport records the requests an instance forwards to others.
type recordingTransport struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.reqs = append(rt.reqs, r)
	rt.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (rt *recordingTransport) take() []*http.Request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := rt.reqs
	rt.reqs = nil
	return out
}

// windowCountTopology: per key, 1-minute tumbling windows of the events,
// updates to "wcounts"; no window closes during the test (the events span
// less than a second and the watermark bound is an hour).
func windowCountTopology(b *Builder) {
	w := Tumbling(time.Minute)
	WindowedCount(GroupByKey(From(b, "events", String(), String()), Codecs(String(), String())), w,
		WindowedStore{Name: "wc", Late: DropLate(), Emit: EmitUpdates()}).
		ToStream().To("wcounts", WindowedKeys(String(), w), Int64())
}

// QueryWindows on two instances: a key's windows come from the partition
// holding the key only — read locally when this instance serves it (no
// request), else with one request to the owner naming that partition — and
// equal both the batch count and what a range over every partition finds.
func TestWindowQueryRoutesToOwner(t *testing.T) {
	b := startBroker(t)
	const parts, keys, n = 4, 24, 300
	b.createTopic("events", parts)
	b.createTopic("wcounts", parts)
	var trs []*recordingTransport
	opts := func() []Opt {
		rt := &recordingTransport{}
		trs = append(trs, rt)
		return []Opt{testLogger(t), StateDir(t.TempDir()), CommitInterval(20 * time.Millisecond),
			QueryServer("127.0.0.1:0"), QueryHTTPClient(&http.Client{Transport: rt, Timeout: 10 * time.Second}),
			Watermarks(time.Hour, 0)}
	}
	apps := []*runningApp{b.run("wq", windowCountTopology, opts()...), b.run("wq", windowCountTopology, opts()...)}

	var recs []wrec
	var krs []*kgo.Record
	for i := range n {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		recs = append(recs, wrec{key: key(i % keys), ts: ts.UnixMilli()})
		krs = append(krs, &kgo.Record{Topic: "events", Key: []byte(key(i % keys)), Value: []byte(strconv.Itoa(i)), Timestamp: ts})
	}
	b.produce(krs...)
	truth := batchTime(recs, 60_000, 60_000, 0, true)
	wk := WindowedKeys(String(), Tumbling(time.Minute))
	b.waitFor("wcounts", 30*time.Second, func(out []*kgo.Record) bool {
		got := map[string]int64{}
		for _, r := range out {
			k, err := wk.Decode(r.Key)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Int64().Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			got[wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())] = v
		}
		return diffResults(got, truth) == "[]"
	})
	waitSplit(t, parts, apps[0].a, apps[1].a)

	remote := 0
	for i, r := range apps {
		q, err := QueryWindows[string, int64](r.a, "wc")
		if err != nil {
			t.Fatal(err)
		}
		other := apps[1-i].a.queryEndpoint()
		local := localPartitions(r.a)
		for k := range keys {
			key := key(k)
			p := keyPartition([]byte(key), parts)
			trs[i].take()
			es, err := retryQuery(t, "fetch "+key, func(ctx context.Context) ([]Entry[Windowed[string], int64], error) {
				return q.Fetch(ctx, key, time.UnixMilli(0), t0.Add(time.Hour))
			})
			if err != nil {
				t.Fatalf("fetch %s: %v", key, err)
			}
			got := map[string]int64{}
			for _, e := range es {
				got[wkey(e.Key.Key, e.Key.Start.UnixMilli(), e.Key.End.UnixMilli())] = e.Value
			}
			want := map[string]int64{}
			for w, c := range truth {
				if w[:len(key)+1] == key+"|" {
					want[w] = c
				}
			}
			if d := diffResults(got, want); d != "[]" {
				t.Fatalf("fetch %s on instance %d: %s", key, i, d)
			}
			reqs := trs[i].take()
			if slices.Contains(local, p) {
				if len(reqs) != 0 {
					t.Fatalf("fetch %s (partition %d, local to instance %d) sent %d requests: %v", key, p, i, len(reqs), urls(reqs))
				}
			} else {
				remote++
				if len(reqs) == 0 {
					t.Fatalf("fetch %s (partition %d, remote) sent no request", key, p)
				}
				for _, rq := range reqs {
					if rq.URL.Host != other || rq.URL.Path != "/v1/stores/wc/range" ||
						rq.URL.Query().Get("partitions") != strconv.Itoa(int(p)) || rq.URL.Query().Get("local") != "1" {
						t.Fatalf("fetch %s (partition %d) on instance %d sent %s, want one range of partition %d on %s",
							key, p, i, rq.URL, p, other)
					}
				}
			}
			// The same windows as a range over every partition finds.
			lo, hi := timekey.KeyWindows([]byte(key), 0)
			all, err := retryQuery(t, "range "+key, func(ctx context.Context) ([]StoreEntry, error) {
				return r.a.Range(ctx, "wc", lo, hi, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(es) {
				t.Fatalf("fetch %s: %d windows, a range over every partition %d", key, len(es), len(all))
			}
			for j, e := range all {
				v, err := decodeWindowAgg(Int64(), false, e.Value)
				if err != nil {
					t.Fatal(err)
				}
				if _, start, _, err := timekey.ParseWindowKey(e.Key); err != nil || start != es[j].Key.Start.UnixMilli() ||
					v != es[j].Value || !e.Timestamp.Equal(es[j].Timestamp) {
					t.Fatalf("fetch %s: window %d is %+v, the every-partition range has %x=%d", key, j, es[j], e.Key, v)
				}
			}
		}
	}
	if remote == 0 {
		t.Fatal("no fetch was routed to the other instance")
	}
	// An unbounded range reads the windows, every one once, and none of
	// the store's bookkeeping (its close index).
	for i, r := range apps {
		all, err := retryQuery(t, "range", func(ctx context.Context) ([]StoreEntry, error) {
			return r.a.Range(ctx, "wc", nil, nil, 10*len(truth))
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all {
			if _, _, _, err := timekey.ParseWindowKey(e.Key); err != nil {
				t.Fatalf("instance %d: unbounded range returned %x, not a window: %v", i, e.Key, err)
			}
		}
		if len(all) != len(truth) {
			t.Fatalf("instance %d: unbounded range returned %d windows, want %d", i, len(all), len(truth))
		}
	}
	for _, r := range apps {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func urls(reqs []*http.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, fmt.Sprint(r.URL))
	}
	return out
}

package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// retryQuery runs fn until it succeeds or fails with a non-retriable error;
// a retriable error past the deadline fails the test.
func retryQuery[T any](t *testing.T, what string, fn func(context.Context) (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := fn(ctx)
		cancel()
		if err == nil || !QueryRetriable(err) {
			return v, err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localPartitions returns the partitions a serves queries for.
func localPartitions(a *App) []int32 {
	a.query.mu.RLock()
	defer a.query.mu.RUnlock()
	var ps []int32
	for id := range a.query.tasks {
		ps = append(ps, id.partition)
	}
	slices.Sort(ps)
	return ps
}

// waitSplit waits until each instance serves some partitions and together
// they serve all of them.
func waitSplit(t *testing.T, parts int, apps ...*App) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		total, ok := 0, true
		for _, a := range apps {
			n := len(localPartitions(a))
			total += n
			ok = ok && n > 0
		}
		if ok && total == parts {
			return
		}
		if time.Now().After(deadline) {
			for i, a := range apps {
				t.Logf("instance %d serves %v", i, localPartitions(a))
			}
			t.Fatal("partitions not split across the instances")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueryRoutesToOwner runs the keyed count on two instances that serve
// queries, and looks every key up on both: each answer is the owner's value,
// which equals the model. Ranges merge both instances' partitions in key
// order.
func TestQueryRoutesToOwner(t *testing.T) {
	b := startBroker(t)
	const parts, keys = 4, 40
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	opts := func() []Opt {
		return []Opt{testLogger(t), StateDir(t.TempDir()), CommitInterval(20 * time.Millisecond), QueryServer("127.0.0.1:0")}
	}
	a1 := b.run("iq", countTopology, opts()...)
	a2 := b.run("iq", countTopology, opts()...)
	truth := map[string]int64{}
	produceEvents(b, 0, 400, keys, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))
	waitSplit(t, parts, a1.a, a2.a)

	routedRemote := 0
	for _, r := range []*runningApp{a1, a2} {
		q, err := QueryStore[string, int64](r.a, "counts")
		if err != nil {
			t.Fatal(err)
		}
		local := localPartitions(r.a)
		for k, want := range truth {
			got, err := retryQuery(t, "get "+k, func(ctx context.Context) (int64, error) {
				v, found, err := q.Get(ctx, k)
				if err == nil && !found {
					err = fmt.Errorf("key %s not found", k)
				}
				return v, err
			})
			if err != nil {
				t.Fatalf("get %s: %v", k, err)
			}
			if got != want {
				t.Errorf("get %s on an instance = %d, want %d", k, got, want)
			}
			if !slices.Contains(local, keyPartition([]byte(k), parts)) {
				routedRemote++
			}
			md, err := retryQuery(t, "metadata "+k, func(context.Context) (KeyMetadata, error) {
				return r.a.KeyMetadata("counts", []byte(k))
			})
			if err != nil {
				t.Fatal(err)
			}
			owner := a1
			if slices.Contains(localPartitions(a2.a), md.Partition) {
				owner = a2
			}
			if md.Local != (owner == r) || md.Active != owner.a.queryEndpoint() || len(md.Standbys) != 0 {
				t.Errorf("metadata of %s on an instance: %+v; owner endpoint %s", k, md, owner.a.queryEndpoint())
			}
		}
		if _, found, err := q.Get(context.Background(), "absent"); found || err != nil {
			// "absent" may live on either instance: both answer "not found".
			if err == nil || !QueryRetriable(err) {
				t.Errorf("get absent key: found %v err %v", found, err)
			}
		}

		all, err := retryQuery(t, "all", func(ctx context.Context) ([]Entry[string, int64], error) { return q.All(ctx, 0) })
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, all, truth, "", "\xff")
		sub, err := retryQuery(t, "range", func(ctx context.Context) ([]Entry[string, int64], error) {
			return q.Range(ctx, "k10", "k20", 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, sub, truth, "k10", "k20")
		lim, err := retryQuery(t, "range limit", func(ctx context.Context) ([]Entry[string, int64], error) { return q.All(ctx, 5) })
		if err != nil {
			t.Fatal(err)
		}
		if len(lim) != 5 || lim[0].Key != "k00" || lim[4].Key != "k04" {
			t.Errorf("All(limit 5) = %v, want k00..k04", lim)
		}
	}
	if routedRemote == 0 {
		t.Fatal("no lookup was routed to the other instance")
	}

	// The HTTP API, on either instance, for every key.
	for _, r := range []*runningApp{a1, a2} {
		ep := r.a.queryEndpoint()
		for k, want := range truth {
			var resp httpGetResponse
			code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/get?key="+k, &resp)
			if code != http.StatusOK {
				t.Fatalf("GET %s on %s: status %d", k, ep, code)
			}
			var got int64
			if err := json.Unmarshal(resp.Entry.Value, &got); err != nil || got != want {
				t.Errorf("GET %s on %s: value %s (%v), want %d", k, ep, resp.Entry.Value, err, want)
			}
			var key string
			if err := json.Unmarshal(resp.Entry.Key, &key); err != nil || key != k {
				t.Errorf("GET %s: key %s", k, resp.Entry.Key)
			}
		}
		for k := range truth {
			var md httpMetadata
			if code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/metadata?key="+k, &md); code != http.StatusOK ||
				md.Partition != keyPartition([]byte(k), parts) || md.Local != slices.Contains(localPartitions(r.a), md.Partition) ||
				md.Local != (md.Active == ep) || md.Active == "" {
				t.Errorf("metadata of %s on %s: %d %+v", k, ep, code, md)
			}
		}
		var rr httpRangeResponse
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/range?from=k30&limit=100", &rr); code != http.StatusOK {
			t.Fatalf("range on %s: status %d", ep, code)
		}
		if len(rr.Entries) != 10 {
			t.Errorf("range from k30 on %s: %d entries, want 10", ep, len(rr.Entries))
		}
		var he httpError
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores/nope/get?key=a", &he); code != http.StatusNotFound || he.Code != "unknown_store" {
			t.Errorf("unknown store: %d %+v", code, he)
		}
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/get?key=absent", &he); code != http.StatusNotFound || he.Code != "not_found" {
			t.Errorf("absent key: %d %+v", code, he)
		}
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/get", &he); code != http.StatusBadRequest || he.Code != "bad_request" {
			t.Errorf("no key: %d %+v", code, he)
		}
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores/counts/range?limit=-1", &he); code != http.StatusBadRequest {
			t.Errorf("bad limit: %d %+v", code, he)
		}
		var list struct {
			Stores []httpStore `json:"stores"`
		}
		if code := httpGetJSON(t, "http://"+ep+"/v1/stores", &list); code != http.StatusOK || len(list.Stores) != 1 ||
			list.Stores[0].Partitions != parts || !slices.Equal(list.Stores[0].Local, localPartitions(r.a)) {
			t.Errorf("store list: %d %+v (local %v)", code, list, localPartitions(r.a))
		}
	}

	if _, _, err := a1.a.Get(context.Background(), "nope", []byte("a")); !errors.Is(err, ErrUnknownStore) {
		t.Errorf("Get on an unknown store: %v, want ErrUnknownStore", err)
	}
	if _, err := QueryStore[string, string](a1.a, "counts"); err == nil {
		t.Error("QueryStore with the wrong value type succeeded")
	}
}

// checkEntries: es are exactly the model's keys in [from, to), in order.
func checkEntries(t *testing.T, es []Entry[string, int64], truth map[string]int64, from, to string) {
	t.Helper()
	var want []string
	for k := range truth {
		if k >= from && k < to {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	var got []string
	for _, e := range es {
		got = append(got, e.Key)
		if e.Value != truth[e.Key] {
			t.Errorf("range entry %s = %d, want %d", e.Key, e.Value, truth[e.Key])
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("range [%q, %q) keys = %v, want %v", from, to, got, want)
	}
}

func httpGetJSON(t *testing.T, url string, out any) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(out)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: decode: %v", url, err)
		}
		return resp.StatusCode
	}
}

// TestQueryNoRoute: the owner of a key's partition advertises no endpoint,
// so an instance that does not own it answers ErrNoRoute, while its own
// keys still answer.
func TestQueryNoRoute(t *testing.T) {
	b := startBroker(t)
	const parts, keys = 4, 40
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	a1 := b.run("iq", countTopology, testLogger(t), StateDir(t.TempDir()), CommitInterval(20*time.Millisecond), QueryServer("127.0.0.1:0"))
	a2 := b.run("iq", countTopology, testLogger(t), StateDir(t.TempDir()), CommitInterval(20*time.Millisecond))
	truth := map[string]int64{}
	produceEvents(b, 0, 200, keys, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))
	waitSplit(t, parts, a1.a, a2.a)
	local := localPartitions(a1.a)
	var noRoute, served int
	for k, want := range truth {
		e, err := retryQuery(t, "get "+k, func(ctx context.Context) (StoreEntry, error) {
			e, _, err := a1.a.Get(ctx, "counts", []byte(k))
			return e, err
		})
		if slices.Contains(local, keyPartition([]byte(k), parts)) {
			if n, _ := Int64().Decode(e.Value); err != nil || n != want {
				t.Errorf("local key %s: %d, %v; want %d", k, n, err, want)
			}
			served++
			continue
		}
		if !errors.Is(err, ErrNoRoute) {
			t.Errorf("key %s owned by an instance without an endpoint: err %v, want ErrNoRoute", k, err)
		}
		noRoute++
	}
	if noRoute == 0 || served == 0 {
		t.Fatalf("served %d, no route %d: want both > 0", served, noRoute)
	}
	// Through HTTP the same error is a 502 no_route.
	for k := range truth {
		if !slices.Contains(local, keyPartition([]byte(k), parts)) {
			var he httpError
			if code := httpGetJSON(t, "http://"+a1.a.queryEndpoint()+"/v1/stores/counts/get?key="+k, &he); code != http.StatusBadGateway || he.Code != "no_route" {
				t.Errorf("HTTP get %s: %d %+v, want 502 no_route", k, code, he)
			}
			break
		}
	}
}

// TestRemoteErrorMapping: every error a query can answer over HTTP comes
// back from a forwarded call as the same sentinel (and retriability).
func TestRemoteErrorMapping(t *testing.T) {
	b := NewBuilder()
	countTopology(b)
	a, err := NewApp("app", b, Brokers("127.0.0.1:1"), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sent, want error
	}{
		{fmt.Errorf("%w: x", ErrUnknownStore), ErrUnknownStore},
		{fmt.Errorf("%w: x", ErrNoRoute), ErrNoRoute},
		{fmt.Errorf("%w: x", ErrRebalancing), ErrRebalancing},
		{fmt.Errorf("%w: x", ErrRestoring), ErrRestoring},
		{ErrNotRunning, ErrNotRunning},
		{fmt.Errorf("%w: x", ErrOwnerUnavailable), ErrOwnerUnavailable},
		{errNotLocal, ErrRebalancing}, // the view sent us to a former owner
		{errors.New("disk on fire"), ErrOwnerUnavailable},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeError(w, c.sent) }))
		_, _, err := a.remoteGet(context.Background(), srv.Listener.Addr().String(), "counts", 0, []byte("k"), false)
		srv.Close()
		if !errors.Is(err, c.want) || QueryRetriable(err) != QueryRetriable(c.want) {
			t.Errorf("owner answered %v: got %v, want %v", c.sent, err, c.want)
		}
	}
	// Not found is an answer, not an error.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeError(w, errKeyNotFound) }))
	defer srv.Close()
	if _, found, err := a.remoteGet(context.Background(), srv.URL, "counts", 0, []byte("k"), false); found || err != nil {
		t.Errorf("remote not found: found %v err %v", found, err)
	}
	// A non-JSON error page is an unavailable owner.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "oops", 500) }))
	defer srv2.Close()
	if _, _, err := a.remoteGet(context.Background(), srv2.URL, "counts", 0, []byte("k"), false); !errors.Is(err, ErrOwnerUnavailable) {
		t.Errorf("plain 500: %v", err)
	}
}

// TestQueryDuringRebalance looks keys up continuously on the first of three
// instances while the others join and leave (gracefully), with one standby
// replica per task. Every answer is a count some owner held: per key, the
// answers never go backwards and never exceed the model; only retriable
// errors occur. With three members each task has exactly one standby, on
// another instance than its owner.
func TestQueryDuringRebalance(t *testing.T) {
	b := startBroker(t)
	const parts, keys = 6, 30
	b.createTopic("events", parts)
	b.createTopic("counts", parts)
	// A task and a standby never hold the same directory: the task would
	// find it locked, delete it and restore in full.
	unusable := &countingHandler{match: "local store unusable"}
	opts := func() []Opt {
		return []Opt{Logger(slog.New(unusable)), StateDir(t.TempDir()), CommitInterval(20 * time.Millisecond), MaxPollRecords(50),
			QueryServer("127.0.0.1:0"), StandbyReplicas(1)}
	}
	a1 := b.run("iqr", countTopology, opts()...)
	truth := map[string]int64{}
	produceEvents(b, 0, 300, keys, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))

	q, err := QueryStore[string, int64](a1.a, "counts")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	var answers, retried int
	last := map[string]int64{} // the query goroutine's until done
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			k := key(i % keys)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n, found, err := q.Get(ctx, k)
			cancel()
			switch {
			case err != nil && QueryRetriable(err):
				retried++
				time.Sleep(5 * time.Millisecond)
			case err != nil:
				done <- fmt.Errorf("get %s: %w", k, err)
				return
			case !found:
				done <- fmt.Errorf("get %s: not found", k)
				return
			case n < last[k]:
				done <- fmt.Errorf("get %s: %d after %d", k, n, last[k])
				return
			default:
				last[k] = n
				answers++
				time.Sleep(time.Millisecond)
			}
		}
	}()

	a2 := b.run("iqr", countTopology, opts()...)
	produceEvents(b, 300, 300, keys, truth)
	a3 := b.run("iqr", countTopology, opts()...)
	waitSplit(t, parts, a1.a, a2.a, a3.a)
	produceEvents(b, 600, 300, keys, truth)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))

	// One standby per task, never on its owner, once the view settled.
	deadline := time.Now().Add(30 * time.Second)
	for {
		standbyOf := map[int32][]int{}
		for i, r := range []*runningApp{a1, a2, a3} {
			for id := range r.a.standbys.positions() {
				standbyOf[id.partition] = append(standbyOf[id.partition], i)
			}
		}
		ok := len(standbyOf) == parts
		for i, r := range []*runningApp{a1, a2, a3} {
			for _, p := range localPartitions(r.a) {
				ok = ok && len(standbyOf[p]) == 1 && standbyOf[p][0] != i
			}
		}
		if ok {
			// KeyMetadata names the same standby.
			apps := []*runningApp{a1, a2, a3}
			for i := range keys {
				k := []byte(key(i))
				md, err := retryQuery(t, "metadata", func(context.Context) (KeyMetadata, error) { return a1.a.KeyMetadata("counts", k) })
				if err != nil {
					t.Fatal(err)
				}
				want := []string{apps[standbyOf[md.Partition][0]].a.queryEndpoint()}
				if !slices.Equal(md.Standbys, want) {
					ok = false
				}
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby placement: %v (owners %v %v %v)", standbyOf,
				localPartitions(a1.a), localPartitions(a2.a), localPartitions(a3.a))
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}
	produceEvents(b, 900, 300, keys, truth)
	if err := a3.stop(); err != nil {
		t.Fatal(err)
	}
	waitSplit(t, parts, a1.a)
	b.waitFor("counts", 30*time.Second, atLeast(t, truth))
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answers, %d retriable errors during the rebalances", answers, retried)
	if n := unusable.n.Load(); n > 0 {
		t.Errorf("%d tasks found their directory unusable (held by a standby?); last:%v", n, unusable.last.Load())
	}
	if answers == 0 {
		t.Fatal("no query answered")
	}
	for k, n := range last {
		if n > truth[k] {
			t.Errorf("key %s answered %d, more than the %d records produced", k, n, truth[k])
		}
	}
	for k, want := range truth {
		n, err := retryQuery(t, "get "+k, func(ctx context.Context) (int64, error) {
			n, _, err := q.Get(ctx, k)
			return n, err
		})
		if err != nil || n != want {
			t.Errorf("final %s: %d, %v; want %d", k, n, err, want)
		}
	}
}

// FuzzQueryHandler sends arbitrary query strings to the HTTP API of an App
// with a restored store partition: every answer is JSON with a known error
// code or a 200, never a panic.
func FuzzQueryHandler(f *testing.F) {
	f.Add("counts", "get", "key=k01")
	f.Add("counts", "get", "key64=%%%")
	f.Add("counts", "range", "from=a&to=b&limit=3")
	f.Add("counts", "range", "local=1&partitions=0,1,x")
	f.Add("counts", "get", "key=k01&local=1")
	f.Add("nope", "get", "key=1")
	f.Add("counts", "metadata", "key=k01")
	bl := NewBuilder()
	countTopology(bl)
	bl2 := NewBuilder()
	Count(GroupByKey(From(bl2, "events", Int64(), String()), Codecs(Int64(), String())), StoreConfig{Name: "byint", TTL: time.Hour})
	var apps []*App
	for _, b := range []*Builder{bl, bl2} {
		a, err := NewApp("app", b, Brokers("127.0.0.1:1"), StateDir(f.TempDir()))
		if err != nil {
			f.Fatal(err)
		}
		for name := range a.stores {
			a.query.partitions = map[string]int32{name: 2}
		}
		// Partition 0 is restored here (and empty); 1 has no owner.
		tk, err := a.newTask(taskID{sub: 0, partition: 0})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { tk.close() })
		a.taskQueryable(tk)
		apps = append(apps, a)
	}
	known := map[string]bool{}
	for _, c := range errorCodes {
		known[c.code] = true
	}
	f.Fuzz(func(t *testing.T, store, op, rawQuery string) {
		for _, a := range apps {
			u := &url.URL{Path: "/v1/stores/" + store + "/" + op, RawQuery: rawQuery}
			req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
			req.URL = u
			rec := httptest.NewRecorder()
			a.QueryHandler().ServeHTTP(rec, req)
			if rec.Header().Get("Content-Type") != "application/json" {
				continue // the mux's own answer: no such route, or a path it cleans (redirect)
			}
			if rec.Code == http.StatusOK {
				continue
			}
			var he httpError
			if err := json.Unmarshal(rec.Body.Bytes(), &he); err != nil || !known[he.Code] {
				t.Fatalf("%s?%s: %d %q", u.Path, rawQuery, rec.Code, rec.Body.String())
			}
		}
	})
}

// countingHandler counts log records whose message contains match.
type countingHandler struct {
	match string
	n     atomic.Int64
	last  atomic.Value // string: the attributes of the last match
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.n.Add(1)
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		h.last.Store(b.String())
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestQueryDescribe: GET /v1/describe answers the App's Describe, so a tool
// reads what a running App guarantees from the App itself.
func TestQueryDescribe(t *testing.T) {
	b := NewBuilder()
	countTopology(b)
	a, err := NewApp("app", b, Brokers("127.0.0.1:1"), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.QueryHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://x/v1/describe", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") || rec.Body.String() != a.Describe() {
		t.Fatalf("%d %s:\n%s\nwant:\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), a.Describe())
	}
}

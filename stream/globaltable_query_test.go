package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A global table's store answers Get, Range, KeyMetadata and the HTTP query
// API from the instance's own replica (partition -1), and says it is not
// running (retriable) before Run has restored it.
func TestGlobalTableQueries(t *testing.T) {
	b := startBrokerOn(t, weirBroker)
	b.createCompacted("products", 2)
	b.createTopic("orders", 3)
	b.createTopic("enriched", 3)
	b.createTopic("enriched-left", 3)
	var recs []*kgo.Record
	for p := range 6 {
		recs = append(recs, &kgo.Record{Topic: "products", Key: []byte(fmt.Sprint("p", p)),
			Value: []byte(fmt.Sprint("name", p)), Timestamp: t0})
	}
	b.produce(recs...)

	bl := NewBuilder()
	globalTopology(bl)
	idle, err := NewApp("glob-q", bl, Brokers(b.seeds...), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := idle.Get(context.Background(), "products", []byte("p1")); !errors.Is(err, ErrNotRunning) || !QueryRetriable(err) {
		t.Fatalf("Get before Run: %v, want ErrNotRunning", err)
	}
	if code, body := httpQuery(t, idle, "/v1/stores/products/get?key=p1"); code != http.StatusServiceUnavailable {
		t.Fatalf("HTTP get before Run: %d %s, want 503 not_running", code, body)
	}

	a := b.run("glob-q", globalTopology, testLogger(t), StateDir(t.TempDir()))
	b.produce(&kgo.Record{Topic: "orders", Key: []byte("o1"), Value: []byte("p3|1"), Timestamp: t0})
	b.waitForIso("enriched", false, 60*time.Second, func(recs []*kgo.Record) bool { return len(recs) > 0 })
	ctx := context.Background()

	e, found, err := a.a.Get(ctx, "products", []byte("p3"))
	if err != nil || !found || string(e.Value) != "name3" || e.Partition != -1 {
		t.Fatalf("Get(p3) = %+v %v %v, want name3 on partition -1", e, found, err)
	}
	es, err := a.a.Range(ctx, "products", []byte("p1"), []byte("p4"), 0)
	if err != nil || len(es) != 3 || string(es[0].Key) != "p1" || string(es[2].Value) != "name3" {
		t.Fatalf("Range[p1,p4) = %+v, %v; want p1..p3", es, err)
	}
	if es, err := a.a.Range(ctx, "products", nil, nil, 2); err != nil || len(es) != 2 {
		t.Fatalf("Range limit 2 = %d entries, %v", len(es), err)
	}
	md, err := a.a.KeyMetadata("products", []byte("p3"))
	if err != nil || md.Partition != -1 || !md.Local {
		t.Fatalf("KeyMetadata = %+v, %v; want partition -1, local", md, err)
	}

	var stores struct{ Stores []httpStore }
	code, body := httpQuery(t, a.a, "/v1/stores")
	if err := json.Unmarshal(body, &stores); code != http.StatusOK || err != nil {
		t.Fatalf("stores: %d %s %v", code, body, err)
	}
	var listed bool
	for _, s := range stores.Stores {
		listed = listed || s.Name == "products" && s.Global
	}
	if !listed {
		t.Fatalf("stores %s: the global store is not listed as global", body)
	}
	var got httpGetResponse
	code, body = httpQuery(t, a.a, "/v1/stores/products/get?key=p2")
	if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil || string(got.Entry.Value) != `"name2"` || got.Entry.Partition != -1 {
		t.Fatalf("HTTP get p2: %d %s", code, body)
	}
	// A forwarded (local=1) request is answered the same way.
	if code, body = httpQuery(t, a.a, "/v1/stores/products/get?key=p2&local=1"); code != http.StatusOK {
		t.Fatalf("HTTP get p2 local: %d %s", code, body)
	}
	if code, body = httpQuery(t, a.a, "/v1/stores/products/get?key=p9"); code != http.StatusNotFound {
		t.Fatalf("HTTP get absent: %d %s, want 404", code, body)
	}
	var rng httpRangeResponse
	code, body = httpQuery(t, a.a, "/v1/stores/products/range?from=p0&to=p9")
	if err := json.Unmarshal(body, &rng); code != http.StatusOK || err != nil || len(rng.Entries) != 6 {
		t.Fatalf("HTTP range: %d %s", code, body)
	}
	var hmd httpMetadata
	code, body = httpQuery(t, a.a, "/v1/stores/products/metadata?key=p2")
	if err := json.Unmarshal(body, &hmd); code != http.StatusOK || err != nil || hmd.Partition != -1 || !hmd.Local {
		t.Fatalf("HTTP metadata: %d %s", code, body)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
}

// httpQuery serves one GET of the App's query API in process.
func httpQuery(t *testing.T, a *App, path string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	a.QueryHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://x"+path, nil))
	return rec.Code, rec.Body.Bytes()
}

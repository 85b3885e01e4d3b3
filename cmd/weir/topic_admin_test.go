package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServeAdminAPI: weir serve mounts the admin API on --http-addr next to
// /metrics, and describe reads a compacted topic's cleaner state from it.
func TestServeAdminAPI(t *testing.T) {
	p := startServe(t, nil, "--data-dir", t.TempDir())
	b := "--brokers=" + p.kafkaAddr
	mustCLI(t, "", "topic", "create", b, "tbl", "-c", "cleanup.policy=compact")
	mustCLI(t, "k1:v1\nk2:v2\n", "produce", b, "tbl", "-K", ":")
	code, body := httpGet(t, "http://"+p.httpAddr+"/v1/partitions/tbl")
	if code != 200 || !strings.Contains(body, `"cleaned_up_to": -1`) || !strings.Contains(body, `"compacted": true`) {
		t.Fatalf("/v1/partitions/tbl: %d\n%s", code, body)
	}
	if code, _ := httpGet(t, "http://"+p.httpAddr+"/v1/partitions/nope"); code != 404 {
		t.Fatalf("unknown topic: %d", code)
	}
	out := mustCLI(t, "", "topic", "describe", b, "tbl", "--output", "json", "--admin-addr", p.httpAddr)
	var got []topicReach
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if c := got[0].Partitions[0].Cleaner; c == nil || c.CleanedUpTo != -1 || c.Source != p.httpAddr {
		t.Fatalf("cleaner from serve's admin API: %+v", got[0].Partitions[0])
	}
}

// TestAdminSourceAddress: --admin-addr defaults to the first broker's host
// with port 9644; "off" disables it.
func TestAdminSourceAddress(t *testing.T) {
	for _, c := range []struct {
		flag    string
		brokers []string
		want    string
	}{
		{"", []string{"10.0.0.5:9092", "10.0.0.6:9092"}, "10.0.0.5:9644"},
		{"", []string{"[::1]:19092"}, "[::1]:9644"},
		{"", []string{"kafka.local"}, "kafka.local:9644"},
		{"127.0.0.1:7000", []string{"10.0.0.5:9092"}, "127.0.0.1:7000"},
		{"off", []string{"10.0.0.5:9092"}, ""},
	} {
		if got := newAdminSource(c.flag, c.brokers, time.Second).addr; got != c.want {
			t.Errorf("newAdminSource(%q, %v) = %q, want %q", c.flag, c.brokers, got, c.want)
		}
	}
}

// TestAdminSourceRefusesForeignAnswers: an HTTP server on the admin address
// that is not weir's (an error status, non-JSON, JSON of another shape)
// yields an error naming the address, never a made-up progress.
func TestAdminSourceRefusesForeignAnswers(t *testing.T) {
	for _, c := range []struct {
		name, ctype, body string
		code              int
		want              string
	}{
		{"404", "application/json", `{"message":"not found"}`, 404, "answered 404"},
		{"html", "text/html", "<html></html>", 200, "answered 200"},
		{"other json", "application/json", `{"ntp":{"ns":"kafka"}}`, 200, "not a weir broker"},
		{"broken json", "application/json", `{"topic":`, 200, "admin API at"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			w.WriteHeader(c.code)
			_, _ = w.Write([]byte(c.body))
		}))
		addr := strings.TrimPrefix(srv.URL, "http://")
		_, err := newAdminSource(addr, nil, time.Second).partitions(context.Background(), "t", "id")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// FuzzDecodeAdminTopic: any body from an admin address decodes to an error
// or to partitions of the asked topic, each once, never a panic.
func FuzzDecodeAdminTopic(f *testing.F) {
	f.Add([]byte(`{"cluster_id":"c","topic":"t","topic_id":"id","partitions":[{"partition":0,"cleaned_up_to":5}]}`))
	f.Add([]byte(`{"topic":"t","topic_id":"id","partitions":[{"partition":0},{"partition":0}]}`))
	f.Add([]byte(`{"topic":"t","topic_id":"id","partitions":[{"partition":-1}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ps, err := decodeAdminTopic(strings.NewReader(string(body)), "t", "id")
		if err != nil {
			return
		}
		for n, p := range ps {
			if n != p.Partition || n < 0 {
				t.Fatalf("partition %d under key %d", p.Partition, n)
			}
		}
	})
}

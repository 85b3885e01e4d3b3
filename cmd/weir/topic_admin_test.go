package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// Issue 18: weir topic trim moves the log start forward (DeleteRecords) to an
// offset or to the first record at or after a time.
func TestTopicTrim(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "tr", "-p", "2")
	// 10 records per partition, one a minute, the last 1 minute ago.
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "{\"value\":\"v%d\",\"timestamp\":%d}\n", i, base.Add(time.Duration(i)*time.Minute).UnixMilli())
	}
	mustCLI(t, in.String(), "produce", b, "tr", "-p", "0", "--input", "json", "-q")
	mustCLI(t, in.String(), "produce", b, "tr", "-p", "1", "--input", "json", "-q")
	starts := func() (int64, int64) {
		var got []topicReach
		if err := json.Unmarshal([]byte(mustCLI(t, "", "topic", "describe", b, "tr", "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		return got[0].Partitions[0].LogStartOffset, got[0].Partitions[1].LogStartOffset
	}

	out := mustCLI(t, "", "topic", "trim", b, "tr", "--before", "4", "-p", "0", "--dry-run")
	if !strings.Contains(out, "dry run") {
		t.Fatalf("dry run:\n%s", out)
	}
	if s0, s1 := starts(); s0 != 0 || s1 != 0 {
		t.Fatalf("dry run trimmed: %d %d", s0, s1)
	}
	mustCLI(t, "", "topic", "trim", b, "tr", "--before", "4", "-p", "0")
	if s0, s1 := starts(); s0 != 4 || s1 != 0 {
		t.Fatalf("after --before 4 -p 0: %d %d", s0, s1)
	}
	if out := mustCLI(t, "", "consume", b, "tr", "-p", "0", "-e"); !strings.HasPrefix(out, "v4\n") {
		t.Fatalf("partition 0 after the trim starts with %q", out)
	}
	// 6.5 minutes back: records 0-3 of each partition are older.
	mustCLI(t, "", "topic", "trim", b, "tr", "--before", "-6m30s")
	if s0, s1 := starts(); s0 != 4 || s1 != 4 {
		t.Fatalf("after --before -6m30s: %d %d", s0, s1)
	}
	mustCLI(t, "", "topic", "trim", b, "tr", "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if s0, s1 := starts(); s0 != 10 || s1 != 10 {
		t.Fatalf("after --before a future time: %d %d", s0, s1)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--before", "11"}, "past the log end 10"},
		{[]string{"--before", "soon"}, "want an offset or a time"},
		{[]string{"--before", "1", "-p", "5"}, "no partition 5"},
		{nil, "--before is required"},
	} {
		if _, errOut, code := runCLI(t, "", append([]string{"topic", "trim", b, "tr"}, tc.args...)...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("trim %v: exit %d, %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

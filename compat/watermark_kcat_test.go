package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// kcat (librdkafka) reading a weir stream App's repartition topic
// read_committed: the watermark markers the App writes there under
// ExactlyOnce are ordinary committed records with a null key, a null value
// and the header "weir.wm" (docs/format/watermark.md) — what a consumer
// other than weir must recognise and skip; every other record is data.
func TestKcatSeesWatermarkMarkers(t *testing.T) {
	kcat := requireTool(t, "kcat")
	addr := startWeir(t).Addr()
	createTopic(t, addr, "wmk-ev", 3)
	createTopic(t, addr, "wmk-out", 3)
	b := stream.NewBuilder()
	stream.Count(stream.GroupBy(stream.From(b, "wmk-ev", stream.String(), stream.String()),
		func(r stream.Record[string, string]) (string, error) { return r.Value, nil }),
		stream.StoreConfig{Name: "n", TTL: time.Hour}).ToStream().To("wmk-out", stream.String(), stream.Int64())
	app, err := stream.NewApp("wmk", b, stream.Brokers(addr), stream.StateDir(t.TempDir()),
		stream.Delivery(stream.ExactlyOnce), stream.WatermarkMarkers(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 30
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "wmk-ev", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i%7)),
			Timestamp: time.UnixMilli(1764633600000 + int64(i)*1000)})
	}
	if err := cl.ProduceSync(testContext(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The App creates its repartition topic as it starts: wait for it
	// before kcat, which fails on a topic that does not exist yet.
	deadline := time.Now().Add(60 * time.Second)
	adm := kadm.NewClient(cl)
	for {
		td, err := adm.ListTopics(testContext(t, 10*time.Second), "wmk-n-repartition")
		if err == nil && td.Has("wmk-n-repartition") && td["wmk-n-repartition"].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the App's repartition topic was not created within 60s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		data, markers, header := readRepartition(t, kcat, addr, "wmk-n-repartition")
		if data == n && markers >= 9 {
			if header != "weir.wm" {
				t.Fatalf("marker header %q", header)
			}
			return
		}
		if data > n {
			t.Fatalf("%d data records in the repartition topic, want %d (a marker taken for data?)", data, n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("repartition topic: %d data records, %d markers; want %d and >= 9 (3 writers x 3 partitions)", data, markers, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readRepartition reads topic with kcat (read_committed) and counts data
// records and markers (null key and value, one header).
func readRepartition(t *testing.T, kcat, addr, topic string) (data, markers int, header string) {
	t.Helper()
	out := runToolRaw(t, nil, kcat, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-J", "-q",
		"-X", "isolation.level=read_committed")
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m struct {
			Key     *string  `json:"key"`
			Payload *string  `json:"payload"`
			Headers []string `json:"headers"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("kcat -J line %q: %v", trunc(sc.Text()), err)
		}
		if m.Key == nil && m.Payload == nil && len(m.Headers) == 2 {
			markers++
			header = m.Headers[0]
			continue
		}
		data++
	}
	return data, markers, header
}

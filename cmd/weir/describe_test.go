package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// TestDescribeApp: weir describe reads a running stream App from the
// system: its instance and query API from the group, its statement from
// the App itself, the replay reach of what it reads; and says so when the
// App is not running or the group is not an App's.
func TestDescribeApp(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	for _, topic := range []string{"rides", "rides-per-minute", "rides-late"} {
		mustCLI(t, "", "topic", "create", b, topic, "-p", "2")
	}
	mustCLI(t, "k:v\n", "produce", b, "rides", "-K", ":", "-q")

	sb := stream.NewBuilder()
	per := stream.Tumbling(time.Minute)
	stream.WindowedCount(stream.GroupByKey(stream.From(sb, "rides", stream.String(), stream.String())), per,
		stream.WindowedStore{Name: "per-minute", Grace: time.Second, Late: stream.LateToTopic("rides-late"), Emit: stream.EmitFinal()}).
		ToStream().To("rides-per-minute", stream.WindowedKeys(stream.String(), per), stream.Int64())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	queryAddr := ln.Addr().String()
	ln.Close()
	app, err := stream.NewApp("fleet", sb, stream.Brokers(addr), stream.StateDir(t.TempDir()),
		stream.CommitInterval(50*time.Millisecond), stream.QueryServer(queryAddr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	appCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(appCtx) }()
	defer func() {
		stop()
		<-done
	}()

	// Until the App has joined its group with both partitions.
	var d struct {
		Instances []struct {
			QueryURL   string             `json:"query_url"`
			Assignment map[string][]int32 `json:"assignment"`
		} `json:"instances"`
		Statement string   `json:"statement"`
		Inputs    []string `json:"inputs"`
		Reach     []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Reach string `json:"replay_reach"`
			} `json:"partitions"`
		} `json:"replay_reach"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, errOut, code := runCLI(t, "", "describe", b, "fleet", "-o", "json")
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if len(d.Instances) == 1 && len(d.Instances[0].Assignment["rides"]) == 2 && d.Statement != "" {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("app: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("weir describe never showed the running App: exit %d %s\n%s", code, errOut, out)
		}
	}
	if d.Instances[0].QueryURL != "http://"+queryAddr || !strings.HasPrefix(d.Statement, "app fleet (at-least-once)\n") ||
		!strings.Contains(d.Statement, "late records: to topic rides-late") {
		t.Fatalf("instance %+v, statement:\n%s", d.Instances[0], d.Statement)
	}
	if len(d.Inputs) != 1 || d.Inputs[0] != "rides" || len(d.Reach) != 1 || len(d.Reach[0].Partitions) != 2 ||
		!strings.Contains(d.Reach[0].Partitions[0].Reach+d.Reach[0].Partitions[1].Reach, "replayable from offset 0") {
		t.Fatalf("inputs %v, reach %+v", d.Inputs, d.Reach)
	}
	out := mustCLI(t, "", "describe", b, "fleet")
	for _, want := range []string{"application: fleet\n", " http://" + queryAddr + " ", "\n# from http://" + queryAddr + "/v1/describe\napp fleet (at-least-once)\n",
		"\nreplay reach of rides:\nPARTITION "} {
		if !strings.Contains(out, want) {
			t.Fatalf("text does not hold %q:\n%s", want, out)
		}
	}

	// A plain consumer group is not an App's.
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("plain"), kgo.ConsumeTopics("rides"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pollCtx, pollCancel := context.WithTimeout(ctx, 100*time.Millisecond)
		plain.PollFetches(pollCtx)
		pollCancel()
		_, errOut, code := runCLI(t, "", "describe", b, "plain")
		if code != 0 && strings.Contains(errOut, `group "plain" is not a weir stream application's`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe of a plain consumer group: exit %d, %s", code, errOut)
		}
	}

	// Stopped, the App has no running instance.
	stop()
	if err := <-done; err != nil {
		t.Fatalf("app: %v", err)
	}
	done <- nil
	if _, errOut, code := runCLI(t, "", "describe", b, "fleet"); code == 0 || !strings.Contains(errOut, `application "fleet" has no running instance`) {
		t.Fatalf("describe of a stopped App: exit %d, %s", code, errOut)
	}
}

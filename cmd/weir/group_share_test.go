package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// weir group list and describe show share groups (KIP-932): type share,
// members with their assignment, per partition the share-partition start
// offset and the lag of records not yet acknowledged.
func TestGroupShareListDescribe(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "jobs", "-p", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := groupTestClient(t, addr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "queue"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set share.auto.offset.reset: %v %+v", err, resp)
	}
	p := groupTestClient(t, addr, kgo.DefaultProduceTopic("jobs"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 10 {
		if err := p.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", i+1))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	member := groupTestClient(t, addr, kgo.ShareGroup("queue"), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(200*time.Millisecond))
	// Consume (and accept) everything.
	got := 0
	for got < 10 {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := member.PollFetches(pctx)
		pcancel()
		got += fs.NumRecords()
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 10", got)
		}
	}
	member.MarkAcks(kgo.AckAccept)
	if err := member.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	out := mustCLI(t, "", "group", "list", b, "--type", "share")
	if !regexpLine(out, `^queue\s+Stable\s+share\s+share`) {
		t.Fatalf("group list --type share:\n%s", out)
	}
	if out := mustCLI(t, "", "group", "list", b, "--type", "consumer"); strings.Contains(out, "queue") {
		t.Fatalf("group list --type consumer shows the share group:\n%s", out)
	}
	for {
		out = mustCLI(t, "", "group", "describe", b, "queue")
		if strings.Contains(out, "type:     share") && regexpLine(out, `^jobs\s+0\s+5\s+0\s+5\s+0\s`) && regexpLine(out, `^jobs\s+1\s+5\s+0\s+5\s+0\s`) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group describe queue:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "jobs[0,1]") {
		t.Fatalf("describe shows no assignment:\n%s", out)
	}
	var d groupDescription
	if err := json.Unmarshal([]byte(mustCLI(t, "", "group", "describe", b, "queue", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Type != "share" || len(d.Members) != 1 || len(d.Offsets) != 2 || d.TotalLag != 0 || *d.Offsets[0].Committed != 5 {
		t.Fatalf("describe -o json: %+v", d)
	}

	// A share group with a member cannot be deleted; once it left, it can.
	if _, errOut, code := runCLI(t, "", "group", "delete", b, "queue"); code == 0 || !strings.Contains(errOut, "active members") {
		t.Fatalf("delete of a share group with a member: exit %d: %s", code, errOut)
	}
	member.Close()
	for {
		out, errOut, code := runCLI(t, "", "group", "delete", b, "queue")
		if code == 0 && strings.Contains(out, `deleted group "queue"`) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("delete after the member left: exit %d: %s %s", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, errOut, code := runCLI(t, "", "group", "describe", b, "queue"); code == 0 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("describe of the deleted share group: exit %d: %s", code, errOut)
	}
}

// A real weir serve killed with SIGKILL keeps its share state: records
// acquired at the kill come back with their delivery count, accepted ones
// never do, and --share-delivery-count-limit 2 archives a record released
// at its second delivery.
func TestShareStateSurvivesKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--data-dir", dir, "--share-delivery-count-limit", "2", "--queued-max-request-bytes", "33554432"}
	p := startServe(t, nil, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := "--brokers=" + p.kafkaAddr
	mustCLI(t, "", "topic", "create", b, "q", "-p", "1")
	admin := groupTestClient(t, p.kafkaAddr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "k9"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set share.auto.offset.reset: %v %+v", err, resp)
	}
	prod := groupTestClient(t, p.kafkaAddr, kgo.DefaultProduceTopic("q"))
	for i := range 6 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	first := shareFetchRaw(t, ctx, p.kafkaAddr, "a", []int8{1, 1, 0, 0, 0, 0}) // accept 0-1, hold 2-5
	if len(first) != 6 || first[0] != 1 || first[5] != 1 {
		t.Fatalf("first fetch: %v, want offsets 0-5 with delivery count 1", first)
	}
	prod.Close()
	admin.Close()
	if err := p.stop(syscall.SIGKILL); err == nil {
		t.Fatal("weir serve exited cleanly on SIGKILL")
	}

	p2 := startServe(t, nil, args...)
	defer p2.stop(syscall.SIGTERM)
	again := shareFetchRaw(t, ctx, p2.kafkaAddr, "b", []int8{0, 0, 2, 2, 2, 2}) // release all at count 2
	want := map[int64]int16{2: 2, 3: 2, 4: 2, 5: 2}
	if len(again) != len(want) {
		t.Fatalf("after SIGKILL: %v, want %v", again, want)
	}
	for o, n := range want {
		if again[o] != n {
			t.Fatalf("after SIGKILL: %v, want %v", again, want)
		}
	}
	if rest := shareFetchRaw(t, ctx, p2.kafkaAddr, "c", nil); len(rest) != 0 {
		t.Fatalf("records released at the delivery count limit delivered again: %v", rest)
	}
}

// shareFetchRaw joins share group k9 as member, fetches q/0 in a new share
// session and returns offset -> delivery count. With acks, it then
// acknowledges offset i with acks[i] (0: leave it) in the same session.
func shareFetchRaw(t *testing.T, ctx context.Context, addr, member string, acks []int8) map[int64]int16 {
	t.Helper()
	cl := groupTestClient(t, addr)
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "k9", member, []string{"q"}
	hresp, err := hb.RequestWith(ctx, cl)
	if err != nil || hresp.ErrorCode != 0 || hresp.Assignment == nil || len(hresp.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join: %v %+v", err, hresp)
	}
	id := hresp.Assignment.TopicPartitions[0].TopicID
	g := "k9"
	f := kmsg.NewPtrShareFetchRequest()
	f.GroupID, f.MemberID, f.MaxWaitMillis, f.MaxBytes, f.MaxRecords = &g, &member, 500, 1<<20, 100
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	fresp, err := f.RequestWith(ctx, cl)
	if err != nil || fresp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v %+v", err, fresp)
	}
	got := map[int64]int16{}
	for _, rt := range fresp.Topics {
		for _, rp := range rt.Partitions {
			for _, a := range rp.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					got[o] = a.DeliveryCount
				}
			}
		}
	}
	if acks == nil {
		return got
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &g, &member, 1
	part := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: 0}
	for o, typ := range acks {
		if _, held := got[int64(o)]; typ != 0 && held {
			part.AcknowledgementBatches = append(part.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: int64(o), LastOffset: int64(o), AcknowledgeTypes: []int8{typ}})
		}
	}
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{part}}}
	aresp, err := ack.RequestWith(ctx, cl)
	if err != nil || aresp.ErrorCode != 0 || aresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %v %+v", err, aresp)
	}
	return got
}

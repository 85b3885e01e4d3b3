package main

import (
	"context"
	"encoding/json"
	"strings"
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

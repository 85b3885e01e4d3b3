package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func groupTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func committed(t *testing.T, adm *kadm.Client, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
	return out
}

func TestGroupCommands(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "events", "-p", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// 10 records per partition, timestamps 1 minute apart per record
	// starting an hour ago.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	prod := groupTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 2; p++ {
		for i := range 10 {
			r := &kgo.Record{Topic: "events", Partition: p, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Minute)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(groupTestClient(t, addr))
	// A group that committed 4 of partition 0 and all of partition 1.
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "events", Partition: 0, At: 4, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: "events", Partition: 1, At: 10, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "billing", commit); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	out := mustCLI(t, "", "group", "list", b)
	if !regexpLine(out, `^billing\s+Empty\s`) {
		t.Fatalf("group list:\n%s", out)
	}
	out = mustCLI(t, "", "group", "describe", b, "billing")
	// Partition 0: committed 4, end 10, lag 6; the record at offset 4 is
	// 56 minutes old.
	if !regexpLine(out, `^events\s+0\s+4\s+0\s+10\s+6\s+5[56]m`) || !regexpLine(out, `^events\s+1\s+10\s+0\s+10\s+0\s+0s`) {
		t.Fatalf("group describe:\n%s", out)
	}
	if !strings.Contains(out, "total lag: 6 records") {
		t.Fatalf("group describe total:\n%s", out)
	}

	// Dry run by default.
	out = mustCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--to-earliest")
	if !regexpLine(out, `^events\s+0\s+4\s+→\s+0\s`) || !strings.Contains(out, "dry run") {
		t.Fatalf("reset dry run:\n%s", out)
	}
	if got := committed(t, adm, "billing"); got[0] != 4 {
		t.Fatalf("dry run changed offsets: %v", got)
	}
	mustCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--shift-by", "-3", "--execute")
	if got := committed(t, adm, "billing"); got[0] != 1 || got[1] != 7 {
		t.Fatalf("after shift-by: %v", got)
	}
	mustCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--to-datetime", base.Add(5*time.Minute).UTC().Format(time.RFC3339Nano), "--execute")
	if got := committed(t, adm, "billing"); got[0] != 5 || got[1] != 5 {
		t.Fatalf("after to-datetime: %v", got)
	}
	// Targets before the log start are clamped, and said so.
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"events": {0: {Topic: "events", Partition: 0, At: 3}}}); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--to-offset", "1", "--execute")
	if !strings.Contains(out, "before the log start 3 (outside the replay reach)") {
		t.Fatalf("no log-start warning:\n%s", out)
	}
	if got := committed(t, adm, "billing"); got[0] != 3 || got[1] != 1 {
		t.Fatalf("after to-offset: %v", got)
	}
	mustCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--to-latest", "--execute")
	if got := committed(t, adm, "billing"); got[0] != 10 || got[1] != 10 {
		t.Fatalf("after to-latest: %v", got)
	}

	// Refused while the group has members.
	member := groupTestClient(t, addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("events"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = mustCLI(t, "", "group", "describe", b, "billing")
		if strings.Contains(out, "members:  1") && strings.Contains(out, "events[0,1]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member never showed up:\n%s", out)
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollFetches(pctx)
		pcancel()
	}
	_, errOut, code := runCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events", "--to-earliest", "--execute")
	if code == 0 || !strings.Contains(errOut, "active members") {
		t.Fatalf("reset with members: exit %d, %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "group", "reset-offsets", b, "billing", "--topic", "events")
	if code == 0 || !strings.Contains(errOut, "exactly one of") {
		t.Fatalf("reset without a target: exit %d, %s", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "group", "delete", b, "billing")
	if code == 0 || !strings.Contains(errOut, "active members") {
		t.Fatalf("delete with members: exit %d, %s", code, errOut)
	}
	member.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, errOut, code = runCLI(t, "", "group", "delete", b, "billing")
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delete after the member left: %s", errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, `deleted group "billing"`) {
		t.Fatalf("delete: %s", out)
	}
	if got := committed(t, adm, "billing"); len(got) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}
	_, errOut, code = runCLI(t, "", "group", "delete", b, "billing")
	if code == 0 || !strings.Contains(errOut, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("delete again: exit %d, %s", code, errOut)
	}
}

func TestGroupDescribeKIP848(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "events", "-p", "3")
	member := groupTestClient(t, addr, kgo.ConsumerGroup("next"), kgo.ConsumeTopics("events"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	for {
		out = mustCLI(t, "", "group", "describe", b, "next")
		if strings.Contains(out, "type:     consumer") && strings.Contains(out, "events[0,1,2]") && strings.Contains(out, "state:    Stable") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("KIP-848 member never showed up:\n%s", out)
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollFetches(pctx)
		pcancel()
	}
	out = mustCLI(t, "", "group", "list", b)
	if !regexpLine(out, `^next\s+Stable\s+consumer\s+consumer`) {
		t.Fatalf("group list:\n%s", out)
	}
}

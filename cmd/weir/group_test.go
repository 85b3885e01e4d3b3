package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
		// Until the member joined, the group does not exist (exit 1).
		var errOut string
		var code int
		out, errOut, code = runCLI(t, "", "group", "describe", b, "next")
		if code != 0 && !strings.Contains(errOut, "does not exist") {
			t.Fatalf("group describe: exit %d: %s", code, errOut)
		}
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

// Issue 18: reset-offsets as kafka-consumer-groups users expect it:
// partition selection, relative and ISO times, --by-duration, --all-topics,
// a CSV plan exported and imported; describe of a missing group fails.
func TestGroupResetOffsetsSelection(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "ev", "-p", "3")
	mustCLI(t, "", "topic", "create", b, "other", "-p", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 10 records per partition, one every 10 minutes, the last 5 minutes ago.
	base := time.Now().Add(-95 * time.Minute).Truncate(time.Millisecond)
	prod := groupTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"ev", 0}, {"ev", 1}, {"ev", 2}, {"other", 0}} {
		for i := range 10 {
			r := &kgo.Record{Topic: tp.topic, Partition: tp.p, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * 10 * time.Minute)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(groupTestClient(t, addr))
	commit := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		commit.Add(kadm.Offset{Topic: "ev", Partition: p, At: 5, LeaderEpoch: -1})
	}
	commit.Add(kadm.Offset{Topic: "other", Partition: 0, At: 5, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "g", commit); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	committedTP := func() map[string]int64 {
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		offs.Each(func(o kadm.OffsetResponse) { out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.At })
		return out
	}

	// Partitions 0 and 2 only.
	mustCLI(t, "", "group", "reset-offsets", b, "g", "--topic", "ev:0,2", "--to-earliest", "--execute")
	if got := committedTP(); got["ev/0"] != 0 || got["ev/1"] != 5 || got["ev/2"] != 0 || got["other/0"] != 5 {
		t.Fatalf("after --topic ev:0,2 --to-earliest: %v", got)
	}
	// A relative time, as consume --timestamp takes it: 30 minutes back is
	// between records 6 (35m ago) and 7 (25m ago).
	mustCLI(t, "", "group", "reset-offsets", b, "g", "--topic", "ev:1", "--to-datetime", "-30m", "--execute")
	if got := committedTP(); got["ev/1"] != 7 || got["ev/0"] != 0 {
		t.Fatalf("after --to-datetime -30m: %v", got)
	}
	// --by-duration, ISO 8601 as kafka-consumer-groups: 50 minutes back
	// lands on record 5 (45m ago).
	mustCLI(t, "", "group", "reset-offsets", b, "g", "--topic", "ev:1", "--by-duration", "PT50M", "--execute")
	if got := committedTP(); got["ev/1"] != 5 {
		t.Fatalf("after --by-duration PT50M: %v", got)
	}
	// --all-topics with --shift-by.
	mustCLI(t, "", "group", "reset-offsets", b, "g", "--all-topics", "--shift-by", "2", "--execute")
	if got := committedTP(); got["ev/0"] != 2 || got["ev/1"] != 7 || got["ev/2"] != 2 || got["other/0"] != 7 {
		t.Fatalf("after --all-topics --shift-by 2: %v", got)
	}
	// Export a plan (dry run: nothing changes; stdout is only the CSV),
	// then apply it from the file.
	out, errOut, code := runCLI(t, "", "group", "reset-offsets", b, "g", "--topic", "ev", "--to-offset", "9", "--export")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	if want := "ev,0,9\nev,1,9\nev,2,9\n"; out != want {
		t.Fatalf("exported plan %q, want %q", out, want)
	}
	if got := committedTP(); got["ev/0"] != 2 {
		t.Fatalf("export changed offsets: %v", got)
	}
	planFile := filepath.Join(t.TempDir(), "plan.csv")
	if err := os.WriteFile(planFile, []byte("ev,1,3\ng,other,0,4\nnot-g,other,0,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "", "group", "reset-offsets", b, "g", "--from-file", planFile, "--execute")
	if got := committedTP(); got["ev/1"] != 3 || got["other/0"] != 4 || got["ev/0"] != 2 {
		t.Fatalf("after --from-file: %v\n%s", got, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "ev:7", "--to-earliest"}, "no partition 7"},
		{[]string{"--topic", "ev:x", "--to-earliest"}, "not a partition number"},
		{[]string{"--topic", "ev", "--all-topics", "--to-earliest"}, "exactly one of --topic, --all-topics, --from-file"},
		{[]string{"--topic", "ev", "--to-datetime", "yesterday"}, "--to-datetime"},
		{[]string{"--topic", "ev", "--by-duration", "P"}, "--by-duration"},
		{[]string{"--topic", "ev", "--by-duration", "-5m"}, "--by-duration"},
		{[]string{"--from-file", planFile, "--to-earliest"}, "exactly one of --to-earliest"},
	} {
		_, errOut, code := runCLI(t, "", append([]string{"group", "reset-offsets", b, "g"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("reset-offsets %v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}

	_, errOut, code = runCLI(t, "", "group", "describe", b, "no-such-group")
	if code == 0 || !strings.Contains(errOut, `group "no-such-group" does not exist`) {
		t.Fatalf("describe of a missing group: exit %d, stderr %q", code, errOut)
	}
}

func TestParseTopicSelection(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, "a:*"},
		{[]string{"a:0,2"}, "a:0,2"},
		{[]string{"a,b:1"}, "a:* b:1"},
		{[]string{"a:1", "a:3,4", "b"}, "a:1,3,4 b:*"},
		{[]string{"a", "a:1"}, "a:*"},
		{[]string{"a:1,b,2"}, "2:* a:1 b:*"},
	} {
		sel, err := parseTopicSelection(tc.in)
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		var parts []string
		for _, tp := range sel.topics() {
			if sel[tp] == nil {
				parts = append(parts, tp+":*")
				continue
			}
			var ps []string
			for p := range sel[tp] {
				ps = append(ps, fmt.Sprint(p))
			}
			sort.Strings(ps)
			parts = append(parts, tp+":"+strings.Join(ps, ","))
		}
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{":1", "a:-1", "a:x"} {
		if _, err := parseTopicSelection([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseDurationArg(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90m": 90 * time.Minute, "P1D": 24 * time.Hour, "PT15M": 15 * time.Minute,
		"P1DT2H3M4S": 26*time.Hour + 3*time.Minute + 4*time.Second, "pt1.5s": 1500 * time.Millisecond,
	} {
		if got, err := parseDurationArg(in); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "-5m", "1x", "P1Y"} {
		if _, err := parseDurationArg(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

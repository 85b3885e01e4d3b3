package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Issue 18: -o json on every list and describe command, decodable, with the
// values the text output shows.
func TestOutputJSONEverywhere(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "oj", "-p", "2")
	mustCLI(t, "a\nb\nc\n", "produce", b, "oj", "-p", "0", "-q")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(groupTestClient(t, addr))
	if r, err := adm.CommitOffsets(ctx, "ojg", kadm.Offsets{"oj": {0: {Topic: "oj", Partition: 0, At: 1, LeaderEpoch: -1}}}); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	// An open transaction, for the txn commands.
	tx := groupTestClient(t, addr, kgo.TransactionalID("oj-tx"), kgo.DefaultProduceTopic("oj"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	decode := func(v any, args ...string) {
		t.Helper()
		out := mustCLI(t, "", append(args, b, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("weir %s -o json: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var topics []topicListEntry
	decode(&topics, "topic", "list")
	if len(topics) != 1 || topics[0] != (topicListEntry{Topic: "oj", Partitions: 2, ReplicationFactor: 1}) {
		t.Errorf("topic list: %+v", topics)
	}
	var reach []topicReach
	decode(&reach, "topic", "describe", "oj")
	if len(reach) != 1 || len(reach[0].Partitions) != 2 || reach[0].Partitions[0].EndOffset != 3 {
		t.Errorf("topic describe: %+v", reach)
	}
	var groups []groupListEntry
	decode(&groups, "group", "list")
	if len(groups) != 1 || groups[0].Group != "ojg" {
		t.Errorf("group list: %+v", groups)
	}
	var g groupDescription
	decode(&g, "group", "describe", "ojg")
	// Partition 1 has nothing committed: its lag counts from the log start
	// (the open transaction's record).
	if g.Group != "ojg" || len(g.Offsets) != 2 || g.Offsets[0].Committed == nil || *g.Offsets[0].Committed != 1 || g.Offsets[0].Lag != 2 ||
		g.Offsets[1].Committed != nil || g.Offsets[1].Lag != 1 || g.TotalLag != 3 || g.Members == nil {
		t.Errorf("group describe: %+v", g)
	}
	var txns []txnJSON
	decode(&txns, "txn", "list")
	if len(txns) != 1 || txns[0].TransactionalID != "oj-tx" || txns[0].State != "Ongoing" || txns[0].RunningMs == nil || len(txns[0].Partitions["oj"]) != 1 {
		t.Errorf("txn list: %+v", txns)
	}
	decode(&txns, "txn", "describe", "oj-tx")
	if len(txns) != 1 || txns[0].ProducerEpoch == nil || txns[0].Partitions["oj"][0] != 1 {
		t.Errorf("txn describe: %+v", txns)
	}
	var prods []producerJSON
	decode(&prods, "txn", "producers", "oj")
	open := 0
	for _, p := range prods {
		if p.TxnStartOffset != nil {
			open++
			if p.Partition != 1 || *p.TxnStartOffset != 0 {
				t.Errorf("open transaction's producer: %+v", p)
			}
		}
	}
	if open != 1 {
		t.Errorf("txn producers: %+v", prods)
	}
	if err := tx.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"topic", "list"}, {"group", "list"}, {"group", "describe", "ojg"}, {"txn", "list"}} {
		if _, errOut, code := runCLI(t, "", append(args, b, "-o", "yaml")...); code == 0 || !strings.Contains(errOut, "--output") {
			t.Errorf("%v -o yaml: exit %d, %q", args, code, errOut)
		}
	}
}

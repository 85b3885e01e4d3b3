package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weirhq/weir/weirtest"
)

// kafkajs transactional producer against weir: three transactions over
// every partition (commit, abort, commit), then a kafkajs group consumer
// with readUncommitted: false must see exactly the committed records, and a
// franz-go read_uncommitted reader sees the aborted ones too (so the
// filtering, not a lost write, is what hides them).
func TestKafkaJSTransactions(t *testing.T) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "txn_kafkajs.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in compat/js/node_modules: %s (or: cd compat/js && npm ci)", installHint)
	}
	const (
		topic      = "compat-kafkajs-txn"
		partitions = 3
		per        = 4
	)
	b := weirtest.Start(t, weirtest.TestLog())
	recs := runTool(t, nil, node, script, "run", b.Addr(), topic, fmt.Sprint(partitions), fmt.Sprint(per), "weir-compat-kafkajs-txn")
	var got []string
	for _, r := range recs {
		got = append(got, r.Value)
	}
	slices.Sort(got)
	committed, all := txnValues(partitions, per)
	if !slices.Equal(got, committed) {
		t.Fatalf("kafkajs read_committed consumer saw %d records %v\nwant %d: %v", len(got), got, len(committed), committed)
	}
	if raw := readAllValues(t, b.Addr(), topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(raw, all) {
		t.Fatalf("read_uncommitted saw %v, want %v", raw, all)
	}
}

// txnValues are the values the transactional tests write: transactions 0
// and 2 commit, 1 aborts; each writes per records to every partition.
// Both lists are sorted.
func txnValues(partitions, per int) (committed, all []string) {
	for txn := range 3 {
		for p := range partitions {
			for i := range per {
				v := fmt.Sprintf("t%d-p%d-%d", txn, p, i)
				all = append(all, v)
				if txn != 1 {
					committed = append(committed, v)
				}
			}
		}
	}
	slices.Sort(committed)
	slices.Sort(all)
	return committed, all
}

// readAllValues reads topic from the start with the given isolation until
// it has want records (bounded by 15 s) and returns their values sorted.
// The writers' last transaction commits and covers every partition, so any
// record that should have been hidden sorts before it in its partition and
// is read before the count is reached.
func readAllValues(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(got), want, topic, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	return got
}

// kafkajsTxnScript is the transactional kafkajs driver, failing the test
// (never skipping) when node or kafkajs is missing.
func kafkajsTxnScript(t *testing.T) (node, script string) {
	t.Helper()
	node = requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "txn_kafkajs.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in compat/js/node_modules: %s (or: cd compat/js && npm ci)", installHint)
	}
	return node, script
}

// kafkajs sendOffsets (AddOffsetsToTxn + TxnOffsetCommit): offsets sent in
// a committed transaction become the group's committed offset; offsets sent
// in an aborted one are discarded.
func TestKafkaJSTransactionOffsets(t *testing.T) {
	node, script := kafkajsTxnScript(t)
	const (
		topic = "compat-kafkajs-txn-offsets"
		group = "weir-compat-kafkajs-txn-offsets"
	)
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.Topic(topic, 1))
	runToolRaw(t, nil, node, script, "offsets", b.Addr(), topic, group)
	committed, err := adminFor(t, b.Addr()).FetchOffsets(testContext(t, 10*time.Second), group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	c, ok := committed.Lookup(topic, 0)
	if !ok || c.Err != nil {
		t.Fatalf("group %s: no committed offset for %s/0 (%v)", group, topic, c.Err)
	}
	if c.At != 5 {
		t.Fatalf("group %s: committed offset %d for %s/0, want 5 (from the committed transaction)", group, c.At, topic)
	}
	if got := readAllValues(t, b.Addr(), topic, kgo.ReadUncommitted(), 2); !slices.Equal(got, []string{"o5", "o9"}) {
		t.Fatalf("read_uncommitted saw %v, want [o5 o9]", got)
	}
}

// A second kafkajs producer with the same transactional id fences the
// first: the first's next transaction fails with PRODUCER_FENCED (or
// INVALID_PRODUCER_EPOCH), and its record never becomes visible.
func TestKafkaJSTransactionFencing(t *testing.T) {
	node, script := kafkajsTxnScript(t)
	const topic = "compat-kafkajs-fence"
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.Topic(topic, 1))
	out := runToolRaw(t, nil, node, script, "fence", b.Addr(), topic)
	var res struct {
		Fenced string `json:"fenced"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bad output %q: %v", out, err)
	}
	if res.Fenced != "PRODUCER_FENCED" && res.Fenced != "INVALID_PRODUCER_EPOCH" {
		t.Fatalf("fenced producer failed with %q, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH\n%s", res.Fenced, res.Detail)
	}
	// b1 is committed last, so a leaked a1 would be read before it.
	if got, want := readAllValues(t, b.Addr(), topic, kgo.ReadCommitted(), 3), []string{"a0", "b0", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}

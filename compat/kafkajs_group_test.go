package compat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// kafkajs consumer group (round-robin assigner, eager protocol): two
// members of one group over a 6-partition topic under steady produce; c1
// reads alone, c2 joins, c2 leaves (compat/js/kafkajs_group.js). Checked:
//
//   - the join splits the partitions between the two members, disjointly
//     and evenly; after the leave c1 owns them all;
//   - every acknowledged record is consumed exactly once (each is committed
//     synchronously right after it is read), in offset order per
//     partition, with its key and value;
//   - commits of a partition only move forward, and the group ends with
//     committed = end offset.
func TestKafkaJSGroupJoinLeave(t *testing.T) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "kafkajs_group.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in compat/js/node_modules: %s (or: cd compat/js && npm ci)", installHint)
	}
	addr := startWeir(t).Addr()
	const topic, group = "compat-kafkajs-group", "weir-compat-kafkajs-group"
	createTopic(t, addr, topic, numPartitions)

	evs := parseGroupEvents(t, runToolRaw(t, nil, node, script, addr, topic, group))
	n := checkGroupRecords(t, evs)

	// Assignments, as of the last one each member got in each phase.
	last := map[string][]int32{}
	phase := ""
	for _, e := range evs {
		switch e.Ev {
		case "phase":
			phase = e.Name
		case "assign":
			last[phase+"/"+e.Consumer] = sorted(e.Partitions)
		}
	}
	if got := last["alone/c1"]; fmt.Sprint(got) != fmt.Sprint(allPartitions()) {
		t.Fatalf("alone: c1 owns %v, want every partition", got)
	}
	c1, c2 := last["join/c1"], last["join/c2"]
	if len(c1) != numPartitions/2 || len(c2) != numPartitions/2 || fmt.Sprint(sorted(append(append([]int32(nil), c1...), c2...))) != fmt.Sprint(allPartitions()) {
		t.Fatalf("join: c1 owns %v, c2 owns %v; want an even disjoint split", c1, c2)
	}
	if got := last["leave/c1"]; fmt.Sprint(got) != fmt.Sprint(allPartitions()) {
		t.Fatalf("leave: c1 owns %v, want every partition", got)
	}
	checkGroupCommitted(t, addr, group, topic)
	checkLogHolds(t, addr, topic, evs)
	t.Logf("%d records acknowledged and consumed once; join split c1 %v / c2 %v, leave gave c1 all", n, c1, c2)
}

func allPartitions() []int32 {
	ps := make([]int32, numPartitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// parseGroupEvents parses a group driver's JSON-lines output.
func parseGroupEvents(t *testing.T, out []byte) []groupEvent {
	t.Helper()
	var evs []groupEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e groupEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("bad output line %q: %v", trunc(string(line)), err)
		}
		evs = append(evs, e)
	}
	return evs
}

// checkGroupRecords checks the produced, consumed and commit events of a
// group driver's run: every acknowledged record (distinct offsets, murmur2
// placement) consumed exactly once with its key and value, in offset order
// per partition, nothing else consumed, commits only forward, and the run
// reached its close phase. It returns the number of records.
func checkGroupRecords(t *testing.T, evs []groupEvent) int {
	t.Helper()
	produced := map[[2]int64]groupEvent{}
	consumed := map[[2]int64]string{}
	lastConsumed := map[int32]int64{}
	lastCommit := map[int32]int64{}
	phase := ""
	for _, e := range evs {
		at := [2]int64{int64(e.Partition), e.Offset}
		switch e.Ev {
		case "phase":
			phase = e.Name
		case "produced":
			if prev, dup := produced[at]; dup {
				t.Fatalf("%s and %s both acknowledged at partition %d offset %d", prev.Key, e.Key, e.Partition, e.Offset)
			}
			if p := javaMurmur2(e.Key); p != e.Partition {
				t.Fatalf("key %s acknowledged in partition %d, murmur2 says %d", e.Key, e.Partition, p)
			}
			produced[at] = e
		case "consumed":
			if by, dup := consumed[at]; dup {
				t.Fatalf("partition %d offset %d consumed twice (by %s, then %s in phase %s)", e.Partition, e.Offset, by, e.Consumer, phase)
			}
			consumed[at] = e.Consumer
			if prev, ok := lastConsumed[e.Partition]; ok && e.Offset <= prev {
				t.Fatalf("partition %d: offset %d consumed after %d", e.Partition, e.Offset, prev)
			}
			lastConsumed[e.Partition] = e.Offset
		case "commit":
			if prev, ok := lastCommit[e.Partition]; ok && e.Offset <= prev {
				t.Fatalf("partition %d: %s committed %d after %d was committed", e.Partition, e.Consumer, e.Offset, prev)
			}
			lastCommit[e.Partition] = e.Offset
		case "assign", "revoke", "lost":
		default:
			t.Fatalf("unknown event %q", e.Ev)
		}
	}
	if phase != "close" {
		t.Fatalf("run ended in phase %q", phase)
	}
	for at, p := range produced {
		if _, ok := consumed[at]; !ok {
			t.Fatalf("key %s (partition %d offset %d) acknowledged but never consumed", p.Key, at[0], at[1])
		}
	}
	for _, e := range evs {
		if e.Ev != "consumed" {
			continue
		}
		p, ok := produced[[2]int64{int64(e.Partition), e.Offset}]
		if !ok {
			t.Fatalf("consumed partition %d offset %d, which was never acknowledged", e.Partition, e.Offset)
		}
		if p.Key != e.Key || p.Value != e.Value {
			t.Fatalf("partition %d offset %d: consumed %s=%s, acknowledged %s=%s", e.Partition, e.Offset, e.Key, e.Value, p.Key, p.Value)
		}
	}
	return len(produced)
}

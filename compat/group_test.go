package compat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// groupEvent is one line of compat/py/cooperative_confluent.py's output.
type groupEvent struct {
	Ev         string  `json:"ev"`
	Name       string  `json:"name"`     // phase
	Consumer   string  `json:"consumer"` // consumed, assign, revoke, lost, commit
	Partitions []int32 `json:"partitions"`
	Key        string  `json:"key"`
	Value      string  `json:"value"`
	Partition  int32   `json:"partition"`
	Offset     int64   `json:"offset"`
}

// confluent-kafka-python (librdkafka) with the cooperative-sticky assignor
// (KIP-429): two members of one group over a 6-partition topic under steady
// produce; the first reads alone, the second joins, then leaves. Checked:
//
//   - the join is incremental: the first member is revoked only the
//     partitions the second receives (some, not all) and keeps the others
//     without ever being revoked them; on the leave it is assigned exactly
//     the second's partitions and nothing is revoked;
//   - every acknowledged record was consumed exactly once, by the member
//     that owned its partition at the time, in offset order;
//   - the synchronous commits of each partition, across both members, only
//     move forward, and the group ends with committed = end offset.
func TestConfluentKafkaPythonCooperativeGroup(t *testing.T) {
	requirePythonModule(t, "confluent_kafka")
	b := startWeir(t)
	addr := b.Addr()
	const topic, group = "compat-confluent-coop", "weir-compat-confluent-coop"
	createTopic(t, addr, topic, numPartitions)
	path, err := filepath.Abs(filepath.Join("py", "cooperative_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := runToolRaw(t, nil, systemPython, path, addr, topic, group)
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
	checkCooperativeRun(t, evs)
	checkGroupCommitted(t, addr, group, topic)

	// The log holds exactly what was acknowledged.
	var acked int64
	for _, e := range evs {
		if e.Ev == "produced" {
			acked++
		}
	}
	ends, err := adminFor(t, addr).ListEndOffsets(testContext(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != acked {
		t.Fatalf("the log holds %d records, %d were acknowledged", total, acked)
	}
}

// checkCooperativeRun checks the event stream of one cooperative_confluent.py
// run (see TestConfluentKafkaPythonCooperativeGroup).
func checkCooperativeRun(t *testing.T, evs []groupEvent) {
	t.Helper()
	all := map[int32]bool{}
	for p := int32(0); p < numPartitions; p++ {
		all[p] = true
	}
	phase := ""
	owned := map[string]map[int32]bool{"c1": {}, "c2": {}}
	revoked := map[string]map[string][]int32{"c1": {}, "c2": {}} // consumer -> phase -> partitions
	assigned := map[string]map[string][]int32{"c1": {}, "c2": {}}
	produced := map[[2]int64]groupEvent{}
	consumedAt := map[[2]int64]string{}
	lastConsumed := map[int32]int64{}
	lastCommit := map[int32]int64{}
	// Records read in the join phase: by c1 after it gave partitions up
	// (from the partitions it kept: they never paused), and by c2.
	c1GaveUp, c1ReadAfter, c2ReadInJoin := false, 0, 0
	for _, e := range evs {
		switch e.Ev {
		case "phase":
			phase = e.Name
		case "produced":
			at := [2]int64{int64(e.Partition), e.Offset}
			if prev, dup := produced[at]; dup {
				t.Fatalf("%s and %s both acknowledged at partition %d offset %d", prev.Key, e.Key, e.Partition, e.Offset)
			}
			if p := javaMurmur2(e.Key); p != e.Partition {
				t.Fatalf("key %s acknowledged in partition %d, murmur2 says %d", e.Key, e.Partition, p)
			}
			produced[at] = e
		case "assign", "revoke", "lost":
			own, ok := owned[e.Consumer]
			if !ok {
				t.Fatalf("event for unknown consumer %q", e.Consumer)
			}
			for _, p := range e.Partitions {
				if !all[p] {
					t.Fatalf("%s: %s of partition %d of a %d-partition topic", e.Consumer, e.Ev, p, numPartitions)
				}
				switch e.Ev {
				case "assign":
					if own[p] {
						t.Fatalf("%s (phase %s): assigned partition %d it already owns", e.Consumer, phase, p)
					}
					for other, o := range owned {
						if other != e.Consumer && o[p] {
							t.Fatalf("%s (phase %s): assigned partition %d still owned by %s", e.Consumer, phase, p, other)
						}
					}
					own[p] = true
				default:
					if !own[p] {
						t.Fatalf("%s (phase %s): %s partition %d it does not own", e.Consumer, phase, e.Ev, p)
					}
					delete(own, p)
				}
			}
			if e.Ev == "lost" {
				t.Fatalf("%s (phase %s): partitions %v lost (session expired?)", e.Consumer, phase, e.Partitions)
			}
			if e.Ev == "revoke" && e.Consumer == "c1" && phase == "join" {
				c1GaveUp = true
			}
			if e.Ev == "assign" {
				assigned[e.Consumer][phase] = append(assigned[e.Consumer][phase], e.Partitions...)
			} else {
				revoked[e.Consumer][phase] = append(revoked[e.Consumer][phase], e.Partitions...)
			}
		case "consumed":
			at := [2]int64{int64(e.Partition), e.Offset}
			if by, dup := consumedAt[at]; dup {
				t.Fatalf("partition %d offset %d consumed twice (by %s, then %s in phase %s)", e.Partition, e.Offset, by, e.Consumer, phase)
			}
			if !owned[e.Consumer][e.Partition] {
				t.Fatalf("%s (phase %s) consumed partition %d offset %d without owning it", e.Consumer, phase, e.Partition, e.Offset)
			}
			if prev, ok := lastConsumed[e.Partition]; ok && e.Offset <= prev {
				t.Fatalf("partition %d: offset %d consumed after %d", e.Partition, e.Offset, prev)
			}
			lastConsumed[e.Partition] = e.Offset
			consumedAt[at] = e.Consumer
			if phase == "join" && e.Consumer == "c1" && c1GaveUp {
				c1ReadAfter++
			}
			if phase == "join" && e.Consumer == "c2" {
				c2ReadInJoin++
			}
			if p := javaMurmur2(e.Key); p != e.Partition {
				t.Fatalf("key %s consumed from partition %d, murmur2 says %d", e.Key, e.Partition, p)
			}
		case "commit":
			if prev, ok := lastCommit[e.Partition]; ok && e.Offset <= prev {
				t.Fatalf("partition %d: %s committed %d after %d was committed", e.Partition, e.Consumer, e.Offset, prev)
			}
			lastCommit[e.Partition] = e.Offset
		default:
			t.Fatalf("unknown event %q", e.Ev)
		}
	}
	if phase != "close" {
		t.Fatalf("run ended in phase %q", phase)
	}

	// Every acknowledged record was consumed (with its value), and nothing
	// else was.
	for at, p := range produced {
		if _, ok := consumedAt[at]; !ok {
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

	// Alone: the first member gets every partition, the second nothing.
	if got := sorted(assigned["c1"]["alone"]); fmt.Sprint(got) != fmt.Sprint(keys(all)) || len(revoked["c1"]["alone"]) != 0 {
		t.Fatalf("alone: c1 assigned %v, revoked %v; want every partition, none revoked", got, revoked["c1"]["alone"])
	}
	// Join: the first member gives up some partitions, not all, and the
	// second receives exactly those.
	gaveUp := sorted(revoked["c1"]["join"])
	if len(gaveUp) == 0 || len(gaveUp) == numPartitions {
		t.Fatalf("join: c1 revoked %v; cooperative-sticky revokes only the partitions that move (some, not all)", gaveUp)
	}
	if len(assigned["c1"]["join"]) != 0 {
		t.Fatalf("join: c1 assigned %v; it should only give partitions up", assigned["c1"]["join"])
	}
	if got := sorted(assigned["c2"]["join"]); fmt.Sprint(got) != fmt.Sprint(gaveUp) {
		t.Fatalf("join: c2 assigned %v, c1 gave up %v", got, gaveUp)
	}
	if d := numPartitions/2 - len(gaveUp); d < -1 || d > 1 {
		t.Errorf("join: %d of %d partitions moved; a balanced split moves about half", len(gaveUp), numPartitions)
	}
	if c1ReadAfter == 0 || c2ReadInJoin == 0 {
		t.Fatalf("join: c1 read %d records from the partitions it kept, c2 read %d; both should have read", c1ReadAfter, c2ReadInJoin)
	}
	// Leave: the first member is assigned exactly what the second had and
	// loses nothing.
	if len(revoked["c1"]["leave"])+len(revoked["c1"]["drain"]) != 0 {
		t.Fatalf("leave: c1 revoked %v %v", revoked["c1"]["leave"], revoked["c1"]["drain"])
	}
	if got := sorted(append(assigned["c1"]["leave"], assigned["c1"]["drain"]...)); fmt.Sprint(got) != fmt.Sprint(gaveUp) {
		t.Fatalf("leave: c1 assigned %v, c2 owned %v", got, gaveUp)
	}
	var byC1, byC2 int
	for _, c := range consumedAt {
		if c == "c2" {
			byC2++
		} else {
			byC1++
		}
	}
	var kept []int32
	for p := range all {
		if !contains(gaveUp, p) {
			kept = append(kept, p)
		}
	}
	t.Logf("%d records acknowledged and consumed (c1 %d, c2 %d); join moved partitions %v from c1 to c2, c1 kept %v and read %d records from them after the revoke; leave moved %v back",
		len(produced), byC1, byC2, gaveUp, sorted(kept), c1ReadAfter, gaveUp)
}

func sorted(ps []int32) []int32 {
	out := append([]int32(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func keys(m map[int32]bool) []int32 {
	var out []int32
	for p := range m {
		out = append(out, p)
	}
	return sorted(out)
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

package compat

import (
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
	evs := parseGroupEvents(t, out)
	checkCooperativeRun(t, evs)
	checkGroupCommitted(t, addr, group, topic)
	checkLogHolds(t, addr, topic, evs)
}

// checkCooperativeRun checks the event stream of one cooperative_confluent.py
// run (see TestConfluentKafkaPythonCooperativeGroup).
func checkCooperativeRun(t *testing.T, evs []groupEvent) {
	t.Helper()
	n := checkGroupRecords(t, evs)
	all := map[int32]bool{}
	for p := int32(0); p < numPartitions; p++ {
		all[p] = true
	}
	phase := ""
	owned := map[string]map[int32]bool{"c1": {}, "c2": {}}
	revoked := map[string]map[string][]int32{"c1": {}, "c2": {}} // consumer -> phase -> partitions
	assigned := map[string]map[string][]int32{"c1": {}, "c2": {}}
	consumedAt := map[[2]int64]string{}
	// Records read in the join phase: by c1 after it gave partitions up
	// (from the partitions it kept: they never paused), and by c2.
	c1GaveUp, c1ReadAfter, c2ReadInJoin := false, 0, 0
	for _, e := range evs {
		switch e.Ev {
		case "phase":
			phase = e.Name
		case "produced", "commit": // checked by checkGroupRecords
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
			if !owned[e.Consumer][e.Partition] {
				t.Fatalf("%s (phase %s) consumed partition %d offset %d without owning it", e.Consumer, phase, e.Partition, e.Offset)
			}
			consumedAt[[2]int64{int64(e.Partition), e.Offset}] = e.Consumer
			if phase == "join" && e.Consumer == "c1" && c1GaveUp {
				c1ReadAfter++
			}
			if phase == "join" && e.Consumer == "c2" {
				c2ReadInJoin++
			}
		default:
			t.Fatalf("unknown event %q", e.Ev)
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
		n, byC1, byC2, gaveUp, sorted(kept), c1ReadAfter, gaveUp)
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

// checkLogHolds asserts that the topic's end offsets add up to the number
// of records a group driver reported acknowledged: nothing unacknowledged
// was appended.
func checkLogHolds(t *testing.T, addr, topic string, evs []groupEvent) {
	t.Helper()
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

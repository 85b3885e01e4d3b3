package stream

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// taskID names a task: one partition of one sub-topology (Kafka Streams'
// TaskId). The task for partition p consumes partition p of every source
// topic of its sub-topology that has one.
type taskID struct {
	sub       int
	partition int32
}

// String renders the id as Kafka Streams does ("<sub-topology>_<partition>");
// it names the task's state directory and metric label.
func (id taskID) String() string { return strconv.Itoa(id.sub) + "_" + strconv.Itoa(int(id.partition)) }

func compareTaskIDs(x, y taskID) int {
	return cmp.Or(cmp.Compare(x.sub, y.sub), cmp.Compare(x.partition, y.partition))
}

// topicPartition is one partition of one topic.
type topicPartition struct {
	topic     string
	partition int32
}

// subTopology is a connected part of the processor graph: the operators
// reachable from its sources, cut at repartition topics (a repartition sink
// ends one sub-topology, the repartition source starts another). A
// stream-table join links the table's source into the joined stream's
// sub-topology.
//
// Invariant: every source belongs to exactly one sub-topology; sub-topology
// indexes are assigned in the order of their first source's declaration, so
// they are stable for a given program (they name task state directories).
type subTopology struct {
	idx     int
	sources []*sourceNode // in declaration order
	// copartitioned is set when the sub-topology reads or joins a table:
	// all its external sources must have the same partition count
	// (checked at start), and its repartition topics are created with
	// that count (or, with no external source, the count of its first
	// repartition topic).
	copartitioned bool
}

// buildSubTopologies computes the connected components of the graph over
// node edges (parent to child) and the builder's join links.
func buildSubTopologies(b *Builder) []*subTopology {
	parent := make([]int, len(b.nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	union := func(x, y int) {
		if rx, ry := find(x), find(y); rx != ry {
			parent[max(rx, ry)] = min(rx, ry)
		}
	}
	for _, n := range b.nodes {
		for _, c := range n.children {
			union(n.id, c.id)
		}
	}
	for _, l := range b.links {
		union(l[0], l[1])
	}
	joined := map[int]bool{} // roots of components holding a stream-table join
	for _, l := range b.links {
		joined[find(l[0])] = true
	}
	byRoot := map[int]*subTopology{}
	var subs []*subTopology
	for _, s := range b.sources {
		r := find(s.node.id)
		st, ok := byRoot[r]
		if !ok {
			st = &subTopology{idx: len(subs)}
			byRoot[r] = st
			subs = append(subs, st)
		}
		st.sources = append(st.sources, s)
		if s.table != "" || joined[r] {
			st.copartitioned = true
		}
	}
	return subs
}

// taskCount is the number of tasks of a sub-topology: the largest partition
// count of its sources (equal counts when co-partitioned).
func (a *App) taskCount(st *subTopology) int32 {
	var n int32
	for _, s := range st.sources {
		n = max(n, a.partitions[a.topicOf(s)])
	}
	return n
}

// taskOf returns the task consuming a partition of a source topic.
func (a *App) taskOf(topic string, partition int32) (taskID, bool) {
	s, ok := a.sources[topic]
	if !ok {
		return taskID{}, false
	}
	return taskID{sub: a.subOf[s.idx], partition: partition}, true
}

// taskPartitions lists the source partitions task id consumes, given the
// topics' partition counts.
func (a *App) taskPartitions(id taskID, partitions func(topic string) int32) []topicPartition {
	var out []topicPartition
	for _, s := range a.subs[id.sub].sources {
		topic := a.topicOf(s)
		if id.partition < partitions(topic) {
			out = append(out, topicPartition{topic, id.partition})
		}
	}
	return out
}

// copartitionCheck returns an ErrPartitionMismatch naming the topics and
// their counts if the external sources of a co-partitioned sub-topology
// differ in partition count (Kafka Streams' co-partitioning
// TopologyException). parts holds the external topics' counts.
func (a *App) copartitionCheck(parts map[string]int32) error {
	for _, st := range a.subs {
		if !st.copartitioned {
			continue
		}
		var names []string
		counts := map[int32]bool{}
		for _, s := range st.sources {
			if s.internal {
				continue
			}
			names = append(names, s.topic)
			counts[parts[s.topic]] = true
		}
		if len(counts) > 1 {
			slices.Sort(names)
			desc := ""
			for i, n := range names {
				if i > 0 {
					desc += ", "
				}
				desc += fmt.Sprintf("%s (%d partitions)", n, parts[n])
			}
			return fmt.Errorf("%w: sub-topology %d joins a table or another stream: its input topics must be co-partitioned "+
				"(same partition count, same key partitioning), got %s", ErrPartitionMismatch, st.idx, desc)
		}
	}
	return nil
}

// mergeByTimestamp orders the records a task polled from several of its
// partitions in one round: repeatedly the head with the smallest Kafka
// record timestamp, ties going to a table's source topic first, then by
// topic name. Each partition's records keep their offset order.
//
// This is the rule a stream-table join relies on: within the records of one
// round, a table update is applied before every stream record with a later
// (or equal) timestamp. Records of a later round are not waited for (there
// is no max.task.idle.ms): a table update fetched after a stream record is
// not seen by it.
func mergeByTimestamp(parts [][]*kgo.Record, isTable func(topic string) bool) []*kgo.Record {
	if len(parts) == 1 {
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]*kgo.Record, 0, n)
	heads := make([]int, len(parts))
	before := func(x, y *kgo.Record) bool {
		if !x.Timestamp.Equal(y.Timestamp) {
			return x.Timestamp.Before(y.Timestamp)
		}
		if tx, ty := isTable(x.Topic), isTable(y.Topic); tx != ty {
			return tx
		}
		return x.Topic < y.Topic
	}
	for len(out) < n {
		best := -1
		for i, p := range parts {
			if heads[i] < len(p) && (best < 0 || before(p[heads[i]], parts[best][heads[best]])) {
				best = i
			}
		}
		out = append(out, parts[best][heads[best]])
		heads[best]++
	}
	return out
}

// tableFirst reports whether topic is the source topic of a table.
func (a *App) tableFirst(topic string) bool {
	s, ok := a.sources[topic]
	return ok && s.table != ""
}

package stream

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Guarantee is the delivery guarantee an App runs with.
type Guarantee int

const (
	// AtLeastOnce commits input offsets only after every record produced
	// from them is acknowledged; a crash replays uncommitted input, so
	// duplicates are visible downstream after a crash.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce puts the outputs, changelog, repartition and dead-letter
	// records and the input offsets of each commit interval (CommitInterval,
	// 100ms by default) in one Kafka transaction (KIP-447: the group
	// generation fences zombies), reads inputs read_committed, and applies store changes locally only after
	// the transaction commits. Readers of the outputs must use
	// read_committed. Each App instance uses the transactional id
	// "<app>-<instance>", the instance id being kept in the state directory
	// so a restarted instance fences its previous incarnation.
	ExactlyOnce
)

func (g Guarantee) String() string {
	switch g {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// TopicGuarantee states how records reach one topic the App writes, and by
// what mechanism — derived from the App's configuration and topology.
type TopicGuarantee struct {
	Topic     string
	Role      string // "output", "repartition", "changelog" or "dead-letter"
	Delivery  Guarantee
	Mechanism string
	Ordering  string
}

// StoreBound states the bound and recovery of one state store.
type StoreBound struct {
	Store     string
	Changelog string
	TTL       time.Duration
	// NoExpiry is the reason a store declared StoreConfig.NoExpiry gave:
	// its keys are never expired, a risk Describe reports.
	NoExpiry string
	Recovery string
}

const (
	mechAtLeastOnce = "idempotent producer (acks=all); input offsets committed after every output is acknowledged; " +
		"a crash replays uncommitted input: duplicates visible after a crash"
	mechExactlyOnce = "transactional producer: outputs, changelog and input offsets of each commit interval in one " +
		"transaction, fenced by group generation (KIP-447); exactly once for read_committed readers " +
		"(read_uncommitted readers also see aborted records)"
	orderPerKey = "per key within a partition (murmur2 key partitioning, idempotent producer keeps order across retries)"
)

func (a *App) mechanism() string { return a.path.mechanism() }

// Guarantees lists, for every topic the App writes, its delivery guarantee
// and the mechanism providing it.
func (a *App) Guarantees() []TopicGuarantee {
	var out []TopicGuarantee
	seen := map[string]bool{}
	add := func(g TopicGuarantee) {
		if !seen[g.Topic] {
			seen[g.Topic] = true
			out = append(out, g)
		}
	}
	for _, s := range a.b.sinks {
		role := "output"
		switch {
		case s.internal:
			role = "repartition"
		case s.op == "late":
			role = "late" // a windowed store's LateToTopic
		}
		add(TopicGuarantee{Topic: a.sinkTopic(s), Role: role, Delivery: a.cfg.guarantee,
			Mechanism: a.mechanism(), Ordering: orderPerKey})
	}
	for _, st := range a.b.stores {
		if st.table {
			continue // its changelog is its source topic: the App never writes it
		}
		add(TopicGuarantee{Topic: a.changelogTopic(st.name), Role: "changelog", Delivery: a.cfg.guarantee,
			Mechanism: a.stateMechanism(),
			Ordering:  "per key; written to the task's partition"})
	}
	for _, s := range a.b.sources {
		add(TopicGuarantee{Topic: a.dlqTopic(a.topicOf(s)), Role: "dead-letter", Delivery: a.cfg.guarantee,
			Mechanism: a.mechanism() + "; permanent failures (decode errors, panics, errors not worth retrying) " +
				"at once, retriable ones after " + fmt.Sprint(a.cfg.maxAttempts) + " attempts",
			Ordering: "none across keys; headers name the failing operator and the original topic/partition/offset"})
	}
	return out
}

// Stores lists the App's state stores with their bounds.
func (a *App) Stores() []StoreBound {
	var out []StoreBound
	for _, st := range a.b.stores {
		if st.table {
			out = append(out, StoreBound{Store: st.name, Changelog: a.storeChangelog(st),
				Recovery: "table: bounded by its compacted source topic (no TTL); local Pebble store per task; " +
					"on assignment replays the source topic from the local checkpoint (or the start) up to " +
					"the committed offset, then consumes it"})
			continue
		}
		out = append(out, StoreBound{Store: st.name, Changelog: a.changelogTopic(st.name), TTL: st.ttl, NoExpiry: st.noExpiry,
			Recovery: "local Pebble store per task; on assignment replays the changelog from the local checkpoint " +
				"(written at each commit), or from the start if there is none"})
	}
	return out
}

// Describe renders the topology, guarantees and store bounds as text.
func (a *App) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "app %s (%s)\n", a.id, a.cfg.guarantee)
	for _, st := range a.subs {
		var inputs []string
		for _, s := range st.sources {
			in := a.topicOf(s)
			if s.table != "" {
				in += " (table " + s.table + ")"
			}
			inputs = append(inputs, in)
		}
		slices.Sort(inputs)
		tasks := "one task per partition"
		if n := a.taskCount(st); n > 0 {
			tasks = fmt.Sprintf("tasks %d_0..%d_%d", st.idx, st.idx, n-1)
		}
		if st.copartitioned {
			tasks += ", inputs co-partitioned"
		}
		fmt.Fprintf(&b, "  sub-topology %d (%s): %s\n", st.idx, tasks, strings.Join(inputs, ", "))
		fmt.Fprintf(&b, "    operators: %s\n", strings.Join(a.operators(st), " "))
	}
	for _, g := range a.b.globals {
		fmt.Fprintf(&b, "  global table %s (store %s): every partition in every instance, restored before processing, "+
			"then followed; bounded by the topic's compaction\n", g.topic, g.store)
	}
	for _, g := range a.Guarantees() {
		fmt.Fprintf(&b, "  %-11s %s: %s — %s; order: %s\n", g.Role, g.Topic, g.Delivery, g.Mechanism, g.Ordering)
	}
	for _, s := range a.Stores() {
		if spec := a.stores[s.Store]; spec != nil && spec.window != "" {
			fmt.Fprintf(&b, "  store %s: %s; %s; changelog %s; %s\n", s.Store, a.windowDescription(spec), a.windowLateSummary(s.Store),
				s.Changelog, s.Recovery)
			continue
		}
		if s.NoExpiry != "" {
			fmt.Fprintf(&b, "  store %s: RISK no expiry, keys are kept until deleted (stated reason: %q); changelog %s; %s\n",
				s.Store, s.NoExpiry, s.Changelog, s.Recovery)
			continue
		}
		if s.TTL == 0 {
			fmt.Fprintf(&b, "  store %s: changelog %s; %s\n", s.Store, s.Changelog, s.Recovery)
			continue
		}
		fmt.Fprintf(&b, "  store %s: TTL %v (event time), changelog %s; %s\n", s.Store, s.TTL, s.Changelog, s.Recovery)
	}
	a.describeEventTime(&b)
	return b.String()
}

func (a *App) stateMechanism() string { return a.path.stateMechanism() }

// operators names the operators of a sub-topology in declaration order,
// each followed by its children's node numbers ("map-1>2,3"), so Describe
// shows the graph.
func (a *App) operators(st *subTopology) []string {
	seen := map[int]*node{}
	var visit func(n *node)
	visit = func(n *node) {
		if seen[n.id] != nil {
			return
		}
		seen[n.id] = n
		for _, c := range n.children {
			visit(c)
		}
	}
	for _, s := range st.sources {
		visit(s.node)
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		n := seen[id]
		name := n.name
		if n.op == "source" || n.op == "table" {
			for _, s := range st.sources {
				if s.node == n {
					name += "(" + a.topicOf(s) + ")"
				}
			}
		}
		if len(n.children) > 0 {
			ids := make([]string, len(n.children))
			for i, c := range n.children {
				ids[i] = strconv.Itoa(c.id)
			}
			name += ">" + strings.Join(ids, ",")
		}
		out = append(out, name)
	}
	return out
}

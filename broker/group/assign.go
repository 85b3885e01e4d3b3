package group

import (
	"cmp"
	"slices"
)

// The server-side "uniform" assignor (KIP-848), sticky:
//
//  1. Every member keeps the partitions of its previous target assignment
//     that still exist and that it still subscribes to (a partition claimed
//     twice stays with the first member in ID order).
//  2. Partitions nobody holds go, one at a time in (topic, partition)
//     order, to the least loaded member subscribed to their topic (ties:
//     lowest member ID).
//  3. While some member holds a partition that another subscribed member
//     could take with a load at least two lower, the partition moves from
//     the most loaded member to the least loaded one.
//
// So a join or leave moves only the partitions that must move to restore
// balance (for members with the same subscriptions, loads differ by at
// most one afterwards), and the result depends only on its inputs.

// assignInput is one member's view for the assignor.
type assignInput struct {
	id         string
	subscribed []string    // sorted, deduplicated
	previous   map[tp]bool // previous target assignment
}

// assignUniform computes the target assignment. partitions reports a
// topic's partition count (ok=false: the topic does not exist).
func assignUniform(members []assignInput, partitions func(topic string) (int32, bool)) map[string]map[tp]bool {
	slices.SortFunc(members, func(a, b assignInput) int { return cmp.Compare(a.id, b.id) })
	out := make(map[string]map[tp]bool, len(members))
	subscribers := map[string][]int{} // topic -> member indexes
	for i, m := range members {
		out[m.id] = map[tp]bool{}
		for _, t := range m.subscribed {
			subscribers[t] = append(subscribers[t], i)
		}
	}
	counts := map[string]int32{}
	for t := range subscribers {
		if n, ok := partitions(t); ok && n > 0 {
			counts[t] = n
		}
	}
	subscribes := func(i int, topic string) bool {
		_, ok := slices.BinarySearch(members[i].subscribed, topic)
		return ok
	}
	// 1. Stickiness.
	owner := map[tp]int{}
	for i, m := range members {
		for _, p := range sortedTPs(m.previous) {
			if n, ok := counts[p.topic]; !ok || p.partition < 0 || p.partition >= n || !subscribes(i, p.topic) {
				continue
			}
			if _, taken := owner[p]; taken {
				continue
			}
			owner[p] = i
			out[m.id][p] = true
		}
	}
	load := func(i int) int { return len(out[members[i].id]) }
	// 2. Unassigned partitions to the least loaded subscriber.
	for _, topic := range sortedKeys(counts) {
		for p := int32(0); p < counts[topic]; p++ {
			k := tp{topic, p}
			if _, ok := owner[k]; ok {
				continue
			}
			best := -1
			for _, i := range subscribers[topic] {
				if best < 0 || load(i) < load(best) {
					best = i
				}
			}
			owner[k] = best
			out[members[best].id][k] = true
		}
	}
	// 3. Balance. Each move lowers the sum of squared loads, so the loop
	// terminates; the bound is a guard.
	total := len(owner)
	for range total*len(members) + 1 {
		moved := false
		// Most loaded member first.
		order := make([]int, len(members))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(load(b), load(a)) })
		for _, from := range order {
			for _, k := range sortedTPsDesc(out[members[from].id]) {
				best := -1
				for _, i := range subscribers[k.topic] {
					if load(i) <= load(from)-2 && (best < 0 || load(i) < load(best)) {
						best = i
					}
				}
				if best >= 0 {
					delete(out[members[from].id], k)
					out[members[best].id][k] = true
					owner[k] = best
					moved = true
					break
				}
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	return out
}

func sortedTPsDesc(m map[tp]bool) []tp {
	s := sortedTPs(m)
	slices.Reverse(s)
	return s
}

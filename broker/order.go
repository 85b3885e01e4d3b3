package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Ordering within a connection.
//
// A connection's requests are handled concurrently and answered in order
// (conn.go). Some APIs need more: a request must not start (or a part of
// it must not run) before an earlier request of the same connection on
// the same object is done — Produce per partition (00_produce.go),
// OffsetCommit per group (commit_order.go). Such an API registers an
// order function (api.order), which the read loop calls in request order;
// it takes one link per object from conn.link and waits on it where its
// handler needs to.

// chainKey names an object whose requests are ordered within a
// connection: the API, and the object (a partition by topic name or by
// unknown topic ID, a group by name).
type chainKey struct {
	api  kmsg.Key
	name string
	id   [16]byte
	part int32
}

// chainLink orders one request's use of one object: wait for prev, close
// mine when done. Every link taken must have mine closed eventually, or
// the connection's later requests on the object wait forever.
type chainLink struct{ prev, mine chan struct{} }

// closedChan is the prev of an object's first request on a connection.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// minChainPrune is the number of links a connection keeps before it
// forgets the finished ones.
const minChainPrune = 4096

// link puts a request behind the connection's previous request on k. Read
// loop only.
func (c *conn) link(k chainKey) chainLink {
	prev, ok := c.chains[k]
	if !ok {
		prev = closedChan
	}
	mine := make(chan struct{})
	c.chains[k] = mine
	if len(c.chains) > max(c.chainsPruneAt, minChainPrune) {
		// Forget finished links so a connection that touched many
		// partitions or groups does not keep a channel for each forever.
		// The next prune waits until the map doubled, so links still in
		// use are not rescanned on every call.
		for k, ch := range c.chains {
			select {
			case <-ch:
				delete(c.chains, k)
			default:
			}
		}
		c.chainsPruneAt = 2 * len(c.chains)
	}
	return chainLink{prev: prev, mine: mine}
}

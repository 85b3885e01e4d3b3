package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Ordering of a connection's offset commits.
//
// Requests of one connection are handled concurrently and answered in
// order (conn.go). For OffsetCommit that is not enough: Kafka applies a
// connection's requests one after the other, so a client that pipelines
// commits (librdkafka's asynchronous commits, franz-go's autocommit) can
// rely on the last one sent being the one stored. Handled concurrently,
// two commits of one group could reach the coordinator in either order
// and an older offset overwrite a newer one: a consumer group that
// committed its end offset would later resume from before it (seen as a
// compat test that found the group's committed offsets behind the ones
// the client had been told were committed).
//
// So each OffsetCommit waits until the previous OffsetCommit of the same
// group on the same connection has been handled (answered or failed).
// Commits of different groups, and all other requests, stay concurrent.

// commitChain links req behind this connection's previous OffsetCommit of
// its group and returns the handler to run instead of next. Read loop
// only (it sees requests in order).
func (c *conn) commitChain(req *kmsg.OffsetCommitRequest, next func(context.Context) (kmsg.Response, error)) func(context.Context) (kmsg.Response, error) {
	prev, ok := c.commitChains[req.Group]
	if !ok {
		prev = closedChan
	}
	mine := make(chan struct{})
	c.commitChains[req.Group] = mine
	if len(c.commitChains) > 1024 {
		// Forget finished links (a connection committing for many
		// groups).
		for g, ch := range c.commitChains {
			select {
			case <-ch:
				delete(c.commitChains, g)
			default:
			}
		}
	}
	return func(ctx context.Context) (kmsg.Response, error) {
		// mine is closed even if next panics: the dispatch goroutine
		// recovers, and the next commit must not wait forever.
		defer close(mine)
		// prev always closes: every linked handler runs to its end.
		<-prev
		return next(ctx)
	}
}

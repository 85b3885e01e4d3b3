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

// orderCommits links an OffsetCommit behind this connection's previous
// OffsetCommit of its group and returns next, run once that one is done.
// It is the order of OffsetCommit's registration (groups.go).
func orderCommits(c *conn, _ *slot, req kmsg.Request, next handleCall) handleCall {
	l := c.link(chainKey{api: kmsg.OffsetCommit, name: req.(*kmsg.OffsetCommitRequest).Group})
	return func(ctx context.Context) (kmsg.Response, error) {
		// mine is closed even if next panics: the dispatch goroutine
		// recovers, and the next commit must not wait forever.
		defer close(l.mine)
		// prev always closes: every linked handler runs to its end.
		<-l.prev
		return next(ctx)
	}
}

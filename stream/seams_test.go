package stream

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// The tests' substitutions of an App's parts (config.seams), as options.

// withProducer makes p the tasks' producer instead of a group client, for
// running tasks without a broker. recycles: p keeps no record after its
// promise ran, so tasks may reuse them.
func withProducer(p func(r *kgo.Record, promise func(*kgo.Record, error)), recycles bool) Opt {
	return optFunc(func(c *config) { c.seams.producer, c.seams.producerRecycles = p, recycles })
}

// withKillSwitch: once k is set, the App stops as a killed process would
// (nothing more committed, checkpointed or ended; the group is still left).
func withKillSwitch(k *atomic.Bool) Opt {
	return optFunc(func(c *config) { c.seams.killed = k.Load })
}

// withTaskOwners advertises userData as the member's userData and hands f
// every owners table the balancer computes.
func withTaskOwners(userData []byte, f func([]taskOwner)) Opt {
	return optFunc(func(c *config) { c.seams.memberUserData, c.seams.onTaskOwners = userData, f })
}

// withRestoreBatches hands f, after each batch a restore committed to the
// local store, the records it applied so far.
func withRestoreBatches(f func(applied int)) Opt {
	return optFunc(func(c *config) { c.seams.restoreBatch = f })
}

// withStandbyCheckpoints hands f each checkpoint a standby starts from and
// writes.
func withStandbyCheckpoints(f func(taskID, state.Checkpoint)) Opt {
	return optFunc(func(c *config) { c.seams.standbyCheckpointed = f })
}

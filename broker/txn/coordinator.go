package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator is the transaction coordinator. Its methods are safe for
// concurrent use.
type Coordinator struct {
	opts Options
}

// NewCoordinator replays the state partition and returns a running
// coordinator.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.State == nil {
		return nil, errors.New("txn: Options.State is required")
	}
	if opts.Partitions == nil {
		return nil, errors.New("txn: Options.Partitions is required")
	}
	opts.ensureDefaults()
	return &Coordinator{opts: opts}, nil
}

// Handle answers one transaction-related request.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return nil, fmt.Errorf("txn: request key %d not implemented yet", req.Key())
}

// Verify checks transactional Produce batches (see the package doc).
func (c *Coordinator) Verify(ctx context.Context, txnID string, pid int64, epoch int16, parts []TopicPartition, implicitAdd bool) (codes []int16, release func(), err error) {
	return nil, nil, errors.New("txn: Verify not implemented yet")
}

// Close stops the coordinator.
func (c *Coordinator) Close() error { return nil }

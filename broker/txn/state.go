package txn

import (
	"maps"
	"math"
	"slices"
	"strings"
)

// txnState is a transactional id's state; the values are Kafka's
// (TransactionState in the __transaction_state value schema) and are part
// of the on-disk format.
type txnState int8

const (
	stateEmpty             txnState = 0
	stateOngoing           txnState = 1
	statePrepareCommit     txnState = 2
	statePrepareAbort      txnState = 3
	stateCompleteCommit    txnState = 4
	stateCompleteAbort     txnState = 5
	stateDead              txnState = 6
	statePrepareEpochFence txnState = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s txnState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

func (s txnState) valid() bool { return s >= 0 && int(s) < len(stateNames) }

// parseState maps a ListTransactions state filter (Kafka's names, exact
// match as Kafka's TransactionState.fromName) to a state.
func parseState(name string) (txnState, bool) {
	for i, n := range stateNames {
		if n == name {
			return txnState(i), true
		}
	}
	return 0, false
}

// isPrepare reports whether markers are being written.
func (s txnState) isPrepare() bool { return s == statePrepareCommit || s == statePrepareAbort }

// isComplete reports whether no transaction is open (a new one may start).
func (s txnState) isComplete() bool {
	return s == stateEmpty || s == stateCompleteCommit || s == stateCompleteAbort
}

const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: the
// last epoch a producer may be given is MaxInt16-1, so that a fencing bump
// (which uses MaxInt16) is always possible.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// txnData is the persisted part of a transactional id's metadata (the
// TxnMetadataValue fields), plus lastEpoch which Kafka also keeps only in
// memory (it is -1 after a replay).
type txnData struct {
	producerID     int64
	prevProducerID int64 // the id before the last rotation (KIP-890), -1 if none
	nextProducerID int64 // the id to switch to when a prepare completes (TV2 epoch overflow), -1 if none
	epoch          int16
	lastEpoch      int16 // in memory only: the epoch before the last bump, for retries (KIP-360/588)
	timeoutMs      int32
	state          txnState
	parts          map[TopicPartition]struct{}
	startMs        int64 // transaction start, -1 if none
	updateMs       int64
	tv             int16 // client transaction version of the current/last transaction (0..2)
}

func (d txnData) clone() txnData {
	d.parts = maps.Clone(d.parts)
	if d.parts == nil {
		d.parts = make(map[TopicPartition]struct{})
	}
	return d
}

// sortedParts returns the partitions ordered by topic, then partition, so
// records and responses are deterministic.
func (d *txnData) sortedParts() []TopicPartition {
	ps := slices.Collect(maps.Keys(d.parts))
	slices.SortFunc(ps, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return ps
}

// txnMeta is one transactional id's state. Loop only.
//
// Invariant: at most one transition is in flight (pending != nil) at a
// time; its record is being appended to the state log, and txnData is
// replaced by *pending only after the append succeeded, so memory is
// always what the log says. Requests that would transition while pending
// is set answer CONCURRENT_TRANSACTIONS, as Kafka's
// pendingTransitionInProgress does.
type txnMeta struct {
	id string
	txnData
	pending *txnData

	// holds counts verified appends (Verify) and transactional offset
	// commits in flight for the current transaction; markers are not
	// written until it is zero, so a verified batch lands before its
	// marker.
	holds int
	// markers is the marker job of a PrepareCommit/PrepareAbort, nil
	// otherwise.
	markers *markerJob
}

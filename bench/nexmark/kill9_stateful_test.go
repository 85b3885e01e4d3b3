package nexmark

import "testing"

// The stateful unwindowed queries under ExactlyOnce, killed with SIGKILL
// mid-stream and restarted, as the windowed ones (same child role: one
// App per query, Run, then a bounded restart on the same state
// directories). q3 emits each join result once (its output is compared as
// a multiset: a result twice fails); q4 and q6 aggregate closed auctions,
// so a record applied twice to their state — a replay after the crash
// that the restored state already counted — would leave a wrong average
// as the latest row of some key.
func TestStatefulQueriesKill9ExactlyOnce(t *testing.T) {
	// Killed once half the events is out and every query committed
	// results.
	kill9ExactlyOnce(t, []string{"q3", "q4", "q6"}, 1, 2)
}

package broker

import (
	"testing"
	"time"
)

// Creating a wide topic is measured, not asserted (no timing asserts): see
// -v output. It must succeed and open every partition.
func TestCreateWideTopic(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	start := time.Now()
	mustCreate(t, ctx, b, "wide", 64)
	t.Logf("created 64 partitions in %v", time.Since(start))
	tp, _ := b.topics.get("wide")
	if len(tp.parts) != 64 {
		t.Fatalf("%d partitions", len(tp.parts))
	}
}

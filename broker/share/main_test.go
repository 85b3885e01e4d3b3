package share

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaks a goroutine (a coordinator's
// timer loop or state writer not stopped by Close, a waiting ShareFetch).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

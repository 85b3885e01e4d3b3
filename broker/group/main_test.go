package group

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaks a goroutine (a coordinator
// loop or writer not stopped by Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package stream

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		// This process is an App the kill -9 tests start and kill
		// (kill9_test.go), not a test run.
		os.Exit(runKillChild())
	}
	if os.Getenv(windowKillChildEnv) != "" {
		os.Exit(runWindowKillChild()) // window_kill9_test.go
	}
	goleak.VerifyTestMain(m)
}

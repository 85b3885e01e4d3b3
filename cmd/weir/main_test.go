package main

import (
	"os"
	"testing"

	"github.com/weirhq/weir/weirtest"
)

// execMainEnv makes the test binary act as the weir binary, so tests can
// run `weir serve` as a real process and send it real signals.
const execMainEnv = "WEIR_TEST_EXEC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(execMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startTestBroker starts an in-process weir broker for the client commands.
func startTestBroker(t *testing.T) string {
	t.Helper()
	return weirtest.Start(t).Addr()
}

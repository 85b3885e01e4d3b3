package compat

import (
	"testing"

	"github.com/weirhq/weir/weirtest"
)

// startWeir starts the broker under test: a real weir broker, in-process,
// on a random port, with its logs in the test output on failure.
func startWeir(t *testing.T) *weirtest.Broker {
	t.Helper()
	return weirtest.Start(t, weirtest.TestLog())
}

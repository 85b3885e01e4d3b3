package stream

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	// A child process of the kill -9 tests runs its App, not the tests.
	weirtest.RunChildRole(killChildRoles)
	goleak.VerifyTestMain(m)
}

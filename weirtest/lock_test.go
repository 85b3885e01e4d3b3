package weirtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataDirInUse: weirtest starts brokers through broker.Start, so a
// second test broker on a data directory in use fails the test with the
// holder named, and Restart (which stops before it starts) still works.
func TestDataDirInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := Start(t, WithDataDir(dir), WithTopic("t", 1))

	ftb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(ftb, WithDataDir(dir))
	}()
	<-done
	for _, want := range []string{"in use", fmt.Sprintf("pid=%d", os.Getpid()), "kafka=" + first.Broker().Addr()} {
		if !strings.Contains(ftb.msg, want) {
			t.Errorf("second Start on %s: failure %q does not say %q", dir, ftb.msg, want)
		}
	}

	first.Restart()
	produce(t, first.Client(), "t", 3)
}

// Package kgosuite runs franz-go's own share group integration tests
// (package kgo's TestShareGroup*, TestConsumeRegexShareSkipsInternal and the
// share unit tests beside them) against an in-process weir broker, in CI.
//
// franz-go's integration tests run against any broker named by KGO_SEEDS.
// The test copies the pinned franz-go module (go.mod's version, from the
// module cache: `go list -m` fetches it through the module proxy if it is
// missing) to a temporary directory, since the cache is read-only, and
// runs `go test` on its pkg/kgo there with KGO_SEEDS pointing at the
// broker, single-replica topics (KGO_TEST_RF=1) and KGO_TEST_RECORDS
// records for the ETL test (franz-go's default is 500000; 5000 exercise the
// same paths in seconds). Nothing of franz-go is committed here.
//
// Each named test must report PASS: franz-go skips its share tests when the
// broker does not advertise ShareFetch v2 and ShareAcknowledge v2, and a
// skip is a failure here. It lives in its own package so that its build of
// package kgo (a minute or two on a loaded machine) has its own test
// timeout, apart from compat's.
package kgosuite

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/weirtest"
)

// shareTests are franz-go's tests that must pass against weir.
var shareTests = []string{
	"TestShareGroupETL",
	"TestShareGroupAckOnClose",
	"TestShareGroupOffsetsAdmin",
	"TestConsumeRegexShareSkipsInternal",
	"TestBuildAckRanges",
	"TestDrainPurgedAcksLiveCursor",
	"TestAuditShareLeaveWaitsForInflightMigration",
	"TestAuditShareMoveCollapseMarksCursorUnusable",
}

func TestFranzGoShareGroupSuite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	src := franzGoDir(t, ctx)
	dst := filepath.Join(t.TempDir(), "franz-go")
	copyTree(t, src, dst)

	b := weirtest.Start(t)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v",
		"-run", "^("+strings.Join(shareTests, "|")+")$", "./pkg/kgo")
	cmd.Dir = dst
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+b.Addr(), "KGO_TEST_RF=1", "KGO_LOG_LEVEL=none", "KGO_TEST_RECORDS=5000", "GOWORK=off", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	log := out.String()
	if ctx.Err() != nil {
		t.Fatalf("franz-go's share tests did not finish in time:\n%s", tail(log))
	}
	if err != nil {
		t.Fatalf("franz-go's share tests: %v\n%s", err, tail(log))
	}
	for _, name := range shareTests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).MatchString(log) {
			t.Errorf("%s did not pass (skipped or not run)", name)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", tail(log))
	}
}

// franzGoDir is the module cache directory of the franz-go version go.mod
// pins.
func franzGoDir(t *testing.T, ctx context.Context) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m github.com/twmb/franz-go: %v: %s", err, out)
	}
	return dir
}

// copyTree copies src to dst, files writable (the module cache is not).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func tail(s string) string {
	const n = 8000
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

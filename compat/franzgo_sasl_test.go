package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// franz-go's own SASL integration tests (package kgo: TestSCRAMAuth,
// TestSCRAMAuthBadCredentials, TestOAuthAuth), from the module cache at the
// version go.mod pins, run against a weir broker: KGO_TEST_SCRAM_SEEDS and
// KGO_TEST_OAUTH_SEEDS point at its SASL_PLAINTEXT listener. TestOAuthAuth
// sends unsecured JWTs ("alg":"none"), which Kafka's default validator
// accepts; the broker here allows them explicitly
// (OAuthConfig.AllowUnsecuredTokens), as a test setup must. Each of the
// three must run and pass (a skip fails this test).
func TestFranzGoSASLIntegrationSuite(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("go list -m franz-go: %v", err)
	}
	src := strings.TrimSpace(string(out))
	// The module cache is read-only and go test writes nothing there,
	// but a copy keeps the run independent of the cache's permissions.
	dst := filepath.Join(t.TempDir(), "franz-go")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy franz-go: %v\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", dst).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v\n%s", err, out)
	}

	b := weirtest.Start(t, weirtest.BrokerConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: broker.SASLPlaintext},
		}
		c.SASL.OAuth.AllowUnsecuredTokens = true
	}))
	ctx := testContext(t, 30*time.Second)
	res, err := adminFor(t, b.Addr()).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "kgo", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "kgo-test-pass"}})
	if err != nil || res["kgo"].Err != nil {
		t.Fatalf("create user: %v %v", err, res["kgo"].Err)
	}
	sasl := b.Broker().ListenerAddr("SASL_PLAINTEXT")

	tctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(tctx, goBin, "test", "-count=1", "-v",
		"-run", "^(TestSCRAMAuth|TestSCRAMAuthBadCredentials|TestOAuthAuth)$", ".")
	cmd.Dir = filepath.Join(dst, "pkg", "kgo")
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+b.Addr(), "KGO_TEST_RF=1", "KGO_LOG_LEVEL=none",
		"KGO_TEST_SCRAM_SEEDS="+sasl, "KGO_TEST_SCRAM=kgo:kgo-test-pass:512",
		"KGO_TEST_OAUTH_SEEDS="+sasl,
	)
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	log := buf.String()
	if err != nil {
		t.Fatalf("franz-go SASL tests: %v\n%s", err, tail(log))
	}
	for _, name := range []string{"TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth"} {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).MatchString(log) {
			t.Fatalf("%s did not pass (skipped?):\n%s", name, tail(log))
		}
	}
	t.Logf("franz-go SASL tests passed against weir:\n%s", tail(log))
}

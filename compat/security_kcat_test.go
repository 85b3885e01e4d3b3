package compat

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// runToolFail runs an external program that must fail and returns its
// stderr.
func runToolFail(t *testing.T, stdin []byte, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &ee) {
		t.Fatalf("%s: want a failing exit, got %v (ctx %v)\nstderr:\n%s", shortCmd(name, args), err, ctx.Err(), tail(stderr.String()))
	}
	return stderr.String()
}

// kcat (librdkafka) against the ACL authorizer and client quotas. kcat
// has no SASL here, so it is User:ANONYMOUS; allow.everyone.if.no.acl.found
// lets the driver set things up, and DENY ACLs refuse kcat on one topic:
// librdkafka reports Kafka's authorization error and exits non-zero, while
// the open topic works. A producer-byte-rate quota on kcat's client id
// throttles it (broker metrics), and librdkafka obeys without an error.
func TestKcatACLsAndQuotas(t *testing.T) {
	kcat := requireTool(t, "kcat")
	reg := prometheus.NewRegistry()
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.BrokerConfig(func(c *broker.Config) {
		c.Authorizer = "acl"
		c.AllowEveryoneIfNoACLFound = true
		c.Registerer = reg
	}))
	addr := b.Addr()
	createTopic(t, addr, "open", 1)
	createTopic(t, addr, "locked", 1)
	adm := adminFor(t, addr)
	ctx := testContext(t, toolTimeout)
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Deny("User:ANONYMOUS").Topics("locked").
		Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	lines := []byte("k1:v1\nk2:v2\n")
	runToolRaw(t, lines, kcat, "-P", "-b", addr, "-t", "open", "-K:", "-X", "acks=all")
	stderr := runToolFail(t, lines, kcat, "-P", "-b", addr, "-t", "locked", "-K:", "-X", "acks=all", "-X", "message.timeout.ms=5000")
	if !strings.Contains(strings.ToLower(stderr), "authoriz") {
		t.Fatalf("kcat produce to a denied topic: stderr lacks an authorization error:\n%s", tail(stderr))
	}
	stderr = runToolFail(t, nil, kcat, "-C", "-b", addr, "-t", "locked", "-o", "beginning", "-e", "-X", "topic.metadata.refresh.interval.ms=500")
	if !strings.Contains(strings.ToLower(stderr), "authoriz") {
		t.Fatalf("kcat consume from a denied topic: stderr lacks an authorization error:\n%s", tail(stderr))
	}

	// Quota: 4 KiB/s for client id kcat-q; 64 KiB produced.
	q := "kcat-q"
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &q}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}}}); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for range 64 {
		in.WriteString("k:" + strings.Repeat("x", 1000) + "\n")
	}
	runToolRaw(t, in.Bytes(), kcat, "-P", "-b", addr, "-t", "open", "-K:", "-X", "acks=all", "-X", "client.id=kcat-q",
		"-X", "linger.ms=0", "-X", "batch.num.messages=4")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	throttled := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "weir_broker_quota_throttled_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "client_id" && l.GetValue() == "kcat-q" {
					throttled += m.GetCounter().GetValue()
				}
			}
		}
	}
	if throttled == 0 {
		t.Fatal("kcat over its quota was never throttled")
	}
	checkTopic(t, addr, "open", 1)
}

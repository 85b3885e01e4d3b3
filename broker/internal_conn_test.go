package broker

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An in-process connection is authorized as its own principal: refused
// without an ACL naming it, served with one (here super.users), for
// produce and fetch as well as admin requests; User principals cannot be
// taken; a closed broker refuses.
func TestAuthzInternalPrincipal(t *testing.T) {
	b, _ := aclBroker(t, func(c *Config) { c.SuperUsers = append(c.SuperUsers, "Internal:trusted") })
	ctx := testCtx(t)
	client := func(principal string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("in-process:9092"),
			kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return b.DialInternal(principal) })}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if _, err := kadm.NewClient(client("Internal:stranger")).CreateTopic(ctx, 1, 1, nil, "inproc"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("stranger creates a topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := kadm.NewClient(client("Internal:trusted")).CreateTopic(ctx, 1, 1, nil, "inproc"); err != nil {
		t.Fatalf("trusted creates a topic: %v", err)
	}
	cl := client("Internal:trusted", kgo.ConsumeTopics("inproc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "inproc", Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "v1" {
		t.Fatalf("fetch: %v, %d records", err, fs.NumRecords())
	}
	for _, bad := range []string{"User:admin", "user:admin", "admin", "Internal:", ":x"} {
		if c, err := b.DialInternal(bad); err == nil {
			c.Close()
			t.Errorf("DialInternal(%q) accepted", bad)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DialInternal("Internal:trusted"); !errors.Is(err, ErrBrokerClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/weirtest"
)

// The CLI has no authentication: it is User:ANONYMOUS, made a super user
// here so that it may manage ACLs.
func aclTestBroker(t *testing.T) *weirtest.Broker {
	return weirtest.Start(t, weirtest.Topic("orders", 1), weirtest.BrokerConfig(func(c *broker.Config) {
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:ANONYMOUS"}
	}))
}

func TestACLCommands(t *testing.T) {
	b := aclTestBroker(t)
	bs := "--brokers=" + b.Addr()

	out := mustCLI(t, "", "acl", "add", bs, "--allow", "User:alice", "--operation", "read,describe", "--topic", "orders")
	if strings.Count(out, "created:") != 2 {
		t.Fatalf("add: %s", out)
	}
	mustCLI(t, "", "acl", "add", bs, "--deny", "User:bob", "--operation", "write", "--topic", "logs-", "--pattern", "prefixed")
	mustCLI(t, "", "acl", "add", bs, "--allow", "User:*", "--operation", "read", "--group", "g", "--host", "10.0.0.1")

	var got []aclJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "", "acl", "list", bs, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("list: %+v", got)
	}
	text := mustCLI(t, "", "acl", "list", bs, "--principal", "User:bob")
	if !strings.Contains(text, "logs-") || !strings.Contains(text, "PREFIXED") || !strings.Contains(text, "DENY") || strings.Contains(text, "alice") {
		t.Fatalf("list --principal User:bob:\n%s", text)
	}
	// MATCH lists what applies to a topic name.
	text = mustCLI(t, "", "acl", "list", bs, "--topic", "logs-app", "--pattern", "match")
	if !strings.Contains(text, "User:bob") || strings.Contains(text, "alice") {
		t.Fatalf("list match logs-app:\n%s", text)
	}

	// Refusals: invalid bindings fail before sending, remove needs a filter.
	if _, errOut, code := runCLI(t, "", "acl", "add", bs, "--allow", "User:x", "--operation", "write", "--group", "g"); code == 0 || !strings.Contains(errOut, "not defined on GROUP") {
		t.Fatalf("write on group: exit %d, %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", "acl", "remove", bs); code == 0 || !strings.Contains(errOut, "--all") {
		t.Fatalf("remove without filter: exit %d, %s", code, errOut)
	}

	// The super user (the CLI's ANONYMOUS) is not limited by ACLs.
	p := b.Client(kgo.DefaultProduceTopic("orders"))
	if err := p.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "", "acl", "remove", bs, "--principal", "User:alice")
	if !strings.Contains(out, "2 ACLs removed") {
		t.Fatalf("remove: %s", out)
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "acl", "list", bs, "-o", "json")), &got); err != nil || len(got) != 2 {
		t.Fatalf("after remove: %+v %v", got, err)
	}
}

// Against a broker without an authorizer the commands say so.
func TestACLCommandsNoAuthorizer(t *testing.T) {
	b := weirtest.Start(t)
	_, errOut, code := runCLI(t, "", "acl", "list", "--brokers="+b.Addr())
	if code == 0 || !strings.Contains(errOut, "SECURITY_DISABLED") {
		t.Fatalf("list: exit %d, %s", code, errOut)
	}
}

// kafka-acls' --producer / --consumer sets.
func TestACLAddProducerConsumer(t *testing.T) {
	b := aclTestBroker(t)
	bs := "--brokers=" + b.Addr()
	out := mustCLI(t, "", "acl", "add", bs, "--allow", "User:etl", "--producer", "--topic", "orders",
		"--transactional-id", "etl-", "--pattern", "prefixed", "--idempotent")
	if n := strings.Count(out, "created:"); n != 6 { // 3 topic + 2 txn id + 1 cluster
		t.Fatalf("producer set: %d created\n%s", n, out)
	}
	out = mustCLI(t, "", "acl", "add", bs, "--allow", "User:svc", "--consumer", "--topic", "orders", "--group", "billing")
	if n := strings.Count(out, "created:"); n != 3 {
		t.Fatalf("consumer set: %d created\n%s", n, out)
	}
	var got []aclJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "", "acl", "list", bs, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, a := range got {
		have[a.Principal+" "+a.ResourceType+":"+a.PatternType+":"+a.ResourceName+" "+a.Operation] = true
	}
	for _, want := range []string{
		"User:etl TOPIC:PREFIXED:orders WRITE", "User:etl TOPIC:PREFIXED:orders CREATE", "User:etl TOPIC:PREFIXED:orders DESCRIBE",
		"User:etl TRANSACTIONAL_ID:PREFIXED:etl- WRITE", "User:etl TRANSACTIONAL_ID:PREFIXED:etl- DESCRIBE",
		"User:etl CLUSTER:LITERAL:kafka-cluster IDEMPOTENT_WRITE",
		"User:svc TOPIC:LITERAL:orders READ", "User:svc TOPIC:LITERAL:orders DESCRIBE", "User:svc GROUP:LITERAL:billing READ",
	} {
		if !have[want] {
			t.Errorf("missing %q in %v", want, have)
		}
	}
	for _, bad := range [][]string{
		{"--allow", "User:x", "--consumer", "--topic", "orders"},                     // no group
		{"--deny", "User:x", "--producer", "--topic", "orders"},                      // deny
		{"--allow", "User:x", "--producer", "--topic", "t", "--operation", "read"},   // both
		{"--allow", "User:x", "--operation", "read", "--topic", "t", "--idempotent"}, // idempotent alone
	} {
		if _, _, code := runCLI(t, "", append([]string{"acl", "add", bs}, bad...)...); code == 0 {
			t.Errorf("weir acl add %v succeeded", bad)
		}
	}
}

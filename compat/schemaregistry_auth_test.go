package compat

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/registry"
	"github.com/weirhq/weir/registry/registrytest"
	"github.com/weirhq/weir/weirtest"
)

// The schema registry as weir registry runs it, in front of a cluster it
// does not run: a weir broker with a SASL_PLAINTEXT SCRAM listener and the
// ACL authorizer. The registry logs in as its own user; each HTTP request's
// basic auth is checked by logging in to the cluster as that user, and its
// ACLs are the cluster's. Real schema registry clients with basic auth:
// the user with WRITE (and ALTER_CONFIGS) on the topic registers and reads
// back (200), a wrong
// password is refused with 401, a user without the ACL with 403 (40301).

var srAuthUsers = map[string]string{
	"sr-registry": "registry-Pass-7731",
	"sr-alice":    "alice-Pass-2290",
	"sr-bob":      "bob-Pass-6618",
}

// startAuthRegistry returns the URL of a registry authenticating against
// a SASL/ACL weir broker.
func startAuthRegistry(t *testing.T) string {
	t.Helper()
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.BrokerConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{
			// The driver's: anonymous, made a super user to create the
			// users and ACLs.
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Protocol: broker.SASLPlaintext},
		}
		c.Authorizer = "acl"
		c.SuperUsers = []string{"User:ANONYMOUS", "User:sr-registry"}
	}))
	ctx := testContext(t, 30e9)
	adm := adminFor(t, b.Addr())
	var ups []kadm.UpsertSCRAM
	for u, p := range srAuthUsers {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: p})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
	if err != nil {
		t.Fatal(err)
	}
	for u, r := range res {
		if r.Err != nil {
			t.Fatalf("create user %s: %v", u, r.Err)
		}
	}
	// WRITE registers; ALTER_CONFIGS because kafkajs' first registration
	// of a subject sets its compatibility level.
	acl := kadm.NewACLs().Allow("User:sr-alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpAlterConfigs).ResourcePatternType(kadm.ACLPatternPrefixed)
	if _, err := adm.CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	sasl := b.Broker().ListenerAddr("SASL_PLAINTEXT")
	own := []kgo.Opt{kgo.SASL(scram.Auth{User: "sr-registry", Pass: srAuthUsers["sr-registry"]}.AsSha512Mechanism())}
	return registrytest.ServeClusterAuth(t, []string{sasl}, own, registry.ClusterAuthConfig{Required: true})
}

// checkAuthClient runs a client script (run(user, password, subject)
// returns its output) as the three users and checks the outcomes.
func checkAuthClient(t *testing.T, run func(user, password, subject string) []byte, checkCode bool) {
	t.Helper()
	evs := parseSREvents(t, run("sr-alice", srAuthUsers["sr-alice"], "orders-value"))
	if len(evs["registered"]) != 1 || len(evs["fetched"]) != 1 || len(evs["refused"]) != 0 {
		t.Fatalf("user with the ACL: %+v, want registered and fetched", evs)
	}
	evs = parseSREvents(t, run("sr-alice", "not-"+srAuthUsers["sr-alice"], "orders-value"))
	if r := evs["refused"]; len(r) != 1 || r[0].Status != 401 || (checkCode && r[0].Code != 401) {
		t.Fatalf("wrong password: %+v, want refused with 401", evs)
	}
	evs = parseSREvents(t, run("sr-bob", srAuthUsers["sr-bob"], "orders-value"))
	if r := evs["refused"]; len(r) != 1 || r[0].Status != 403 || (checkCode && r[0].Code != registry.CodeForbidden) ||
		!strings.Contains(r[0].Message, "User is denied operation SUBJECT_") {
		t.Fatalf("user without the ACL: %+v, want refused with 403 (40301)", evs)
	}
}

func TestSchemaRegistryAuthConfluentPython(t *testing.T) {
	requirePythonModule(t, "confluent_kafka.schema_registry")
	url := startAuthRegistry(t)
	script, err := filepath.Abs(filepath.Join("py", "schemaregistry_auth_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	checkAuthClient(t, func(user, password, subject string) []byte {
		return runToolRaw(t, nil, systemPython, script, url, user, password, subject)
	}, true)
}

func TestSchemaRegistryAuthKafkajs(t *testing.T) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "schemaregistry_auth_kafkajs.js"))
	if err != nil {
		t.Fatal(err)
	}
	url := startAuthRegistry(t)
	// kafkajs' client reports the status and the registry's message,
	// not its error code.
	checkAuthClient(t, func(user, password, subject string) []byte {
		return runToolRaw(t, nil, node, script, url, user, password, subject)
	}, false)
}

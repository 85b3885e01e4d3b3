package compat

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/testcerts"
	"github.com/weirhq/weir/weirtest"
)

// Security: real clients over TLS and SASL. The broker has a PLAINTEXT
// listener (first, for the driver's independent checks), a SASL_SSL
// listener and an SSL listener requiring client certificates, with
// certificates made by the test (internal/testcerts). The driver creates
// the SCRAM users over the PLAINTEXT listener with AlterUserScramCredentials
// and the topic; the client under test produces and consumes over the
// secured listener, and a wrong password is refused with the client's
// authentication error.

const (
	secUser = "compat-user"
	secPass = "compat-Pass-8812"
)

type secureWeir struct {
	b    *weirtest.Broker
	ca   *testcerts.CA
	dir  string
	addr string // PLAINTEXT, for the driver
}

func startSecureWeir(t *testing.T) *secureWeir {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir)
	srv := ca.Server("server")
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.BrokerConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SASL_SSL", Addr: "127.0.0.1:0", Protocol: broker.SASLSSL},
			{Name: "SSL", Addr: "127.0.0.1:0", Protocol: broker.SSL},
		}
		c.TLS = broker.TLSConfig{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File}
	}))
	s := &secureWeir{b: b, ca: ca, dir: dir, addr: b.Addr()}
	ctx := testContext(t, 30e9)
	res, err := adminFor(t, s.addr).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: secUser, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: secPass},
		{User: secUser, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: secPass},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[secUser]; r.Err != nil {
		t.Fatalf("create user: %v %s", r.Err, r.ErrMessage)
	}
	return s
}

func (s *secureWeir) listener(name string) string { return s.b.Broker().ListenerAddr(name) }

// runToolFails runs a client that must fail and returns its stderr.
func runToolFails(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5e9
	if err := cmd.Run(); err == nil {
		t.Fatalf("%s succeeded, want a failure", shortCmd(name, args))
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: killed after %v", shortCmd(name, args), toolTimeout)
	}
	return stderr.String()
}

// kcatConfig writes a kcat -F file (keeps the password off the command
// line).
func kcatConfig(t *testing.T, dir, name string, kv map[string]string) string {
	t.Helper()
	var b strings.Builder
	for k, v := range kv {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	path := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512: produce, consume,
// and a wrong password refused with librdkafka's SASL authentication
// error; then over SSL with a client certificate (mTLS), and without one
// refused.
func TestKcatSASLSSLAndMTLS(t *testing.T) {
	kcat := requireTool(t, "kcat")
	s := startSecureWeir(t)
	const topic = "compat-kcat-sasl-ssl"
	createTopic(t, s.addr, topic, numPartitions)
	sent := testRecords()[:120]
	var in bytes.Buffer
	for _, r := range sent {
		fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
	}
	scramConf := kcatConfig(t, s.dir, "scram", map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
		"sasl.username": secUser, "sasl.password": secPass, "ssl.ca.location": s.ca.File,
	})
	saslAddr := s.listener("SASL_SSL")
	runToolRaw(t, in.Bytes(), kcat, "-F", scramConf, "-P", "-b", saslAddr, "-t", topic, "-K:",
		"-X", "acks=all", "-X", "partitioner=murmur2_random", "-X", "message.max.bytes=2000000")
	checkProduced(t, s.addr, topic, sent, nil, javaMurmur2)
	out := runToolRaw(t, nil, kcat, "-F", scramConf, "-C", "-b", saslAddr, "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	checkConsumed(t, sent, nil, parseKcatJSON(t, out), javaMurmur2)

	wrong := kcatConfig(t, s.dir, "wrong", map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
		"sasl.username": secUser, "sasl.password": "not-the-Pass-1", "ssl.ca.location": s.ca.File,
	})
	stderr := runToolFails(t, kcat, "-F", wrong, "-L", "-b", saslAddr, "-m", "10")
	if !strings.Contains(stderr, "Authentication failed") || strings.Contains(stderr, "not-the-Pass-1") {
		t.Fatalf("wrong password: kcat said:\n%s", tail(stderr))
	}

	pair := s.ca.Client("kcat", pkix.Name{CommonName: "kcat", Organization: []string{"weir compat"}})
	mtls := kcatConfig(t, s.dir, "mtls", map[string]string{
		"security.protocol": "SSL", "ssl.ca.location": s.ca.File,
		"ssl.certificate.location": pair.CertFile, "ssl.key.location": pair.KeyFile,
	})
	sslAddr := s.listener("SSL")
	out = runToolRaw(t, nil, kcat, "-F", mtls, "-C", "-b", sslAddr, "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	checkConsumed(t, sent, nil, parseKcatJSON(t, out), javaMurmur2)
	nocert := kcatConfig(t, s.dir, "nocert", map[string]string{"security.protocol": "SSL", "ssl.ca.location": s.ca.File})
	runToolFails(t, kcat, "-F", nocert, "-L", "-b", sslAddr, "-m", "5")
}

// confluent-kafka-python (librdkafka) and kafka-python (pure Python; it
// speaks the SaslHandshake v0 raw-token flow) over SASL_SSL with
// SCRAM-SHA-512, and confluent-kafka-python over mTLS.
func TestPythonClientsSASLSSL(t *testing.T) {
	s := startSecureWeir(t)
	script, err := filepath.Abs(filepath.Join("py", "secure_client.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range []struct{ name, module string }{{"confluent", "confluent_kafka"}, {"kafkapython", "kafka"}} {
		t.Run(lib.name, func(t *testing.T) {
			requirePythonModule(t, lib.module)
			topic := "compat-" + lib.name + "-sasl-ssl"
			createTopic(t, s.addr, topic, numPartitions)
			t.Setenv("WEIR_SEC_PROTOCOL", "SASL_SSL")
			t.Setenv("WEIR_SEC_MECHANISM", "SCRAM-SHA-512")
			t.Setenv("WEIR_SEC_USER", secUser)
			t.Setenv("WEIR_SEC_PASSWORD", secPass)
			t.Setenv("WEIR_SEC_CA", s.ca.File)
			addr := s.listener("SASL_SSL")
			sent := testRecords()[:120]
			acked := runTool(t, jsonLines(sent), systemPython, script, lib.name, "produce", addr, topic)
			checkProduced(t, s.addr, topic, sent, acked, javaMurmur2)
			got := runTool(t, nil, systemPython, script, lib.name, "consume", addr, topic, fmt.Sprint(len(sent)))
			checkConsumed(t, sent, acked, got, javaMurmur2)

			t.Setenv("WEIR_SEC_PASSWORD", "not-the-Pass-2")
			stderr := runToolFails(t, systemPython, script, lib.name, "metadata", addr)
			if strings.Contains(stderr, "not-the-Pass-2") {
				t.Fatalf("client error shows the password:\n%s", tail(stderr))
			}
			// librdkafka shows the broker's SASL_AUTHENTICATION_FAILED
			// message; kafka-python's v0 flow only sees the connection
			// closed (Kafka closes it there too, with no error code).
			if lib.name == "confluent" && !strings.Contains(stderr, "Authentication failed") {
				t.Fatalf("wrong password: no authentication error:\n%s", tail(stderr))
			}
			t.Logf("wrong password: %s", tail(stderr))
		})
	}
	t.Run("confluent-mtls", func(t *testing.T) {
		requirePythonModule(t, "confluent_kafka")
		const topic = "compat-confluent-mtls"
		createTopic(t, s.addr, topic, numPartitions)
		pair := s.ca.Client("py", pkix.Name{CommonName: "py"})
		t.Setenv("WEIR_SEC_PROTOCOL", "SSL")
		t.Setenv("WEIR_SEC_MECHANISM", "")
		t.Setenv("WEIR_SEC_CA", s.ca.File)
		t.Setenv("WEIR_SEC_CERT", pair.CertFile)
		t.Setenv("WEIR_SEC_KEY", pair.KeyFile)
		sent := testRecords()[:60]
		acked := runTool(t, jsonLines(sent), systemPython, script, "confluent", "produce", s.listener("SSL"), topic)
		checkProduced(t, s.addr, topic, sent, acked, javaMurmur2)
	})
}

// weirtest.Restart keeps every listener's port: a client configured with
// the SASL_SSL address logs in again after a restart (users are durable).
func TestSecureListenersSurviveRestart(t *testing.T) {
	s := startSecureWeir(t)
	before := s.listener("SASL_SSL")
	s.b.Restart()
	if after := s.listener("SASL_SSL"); after != before {
		t.Fatalf("SASL_SSL listener moved from %s to %s", before, after)
	}
	d, err := adminFor(t, s.b.Addr()).DescribeUserSCRAMs(testContext(t, 30e9), secUser)
	if err != nil || d[secUser].Err != nil || len(d[secUser].CredInfos) != 2 {
		t.Fatalf("users after restart: %+v %v", d, err)
	}
}

// kafkajs over SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512: the
// admin client creates the topic, a producer writes and a group consumer
// reads everything back (kafkajs consumers always use a group, so the
// group coordinator is reached through FindCoordinator's SASL_SSL
// address); a wrong password fails.
func TestKafkaJSSASLSSL(t *testing.T) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "kafkajs_client.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in compat/js/node_modules: %s (or: cd compat/js && npm ci)", installHint)
	}
	s := startSecureWeir(t)
	addr := s.listener("SASL_SSL")
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Setenv("WEIR_SEC_PROTOCOL", "SASL_SSL")
			t.Setenv("WEIR_SEC_CA", s.ca.File)
			t.Setenv("WEIR_SEC_MECHANISM", mech)
			t.Setenv("WEIR_SEC_USER", secUser)
			t.Setenv("WEIR_SEC_PASSWORD", secPass)
			topic := "compat-kafkajs-" + strings.ToLower(mech)
			runToolRaw(t, nil, node, script, "create", addr, topic, fmt.Sprint(numPartitions))
			checkTopic(t, s.addr, topic, numPartitions)
			sent := testRecords()[:60]
			runToolRaw(t, jsonLines(sent), node, script, "produce", addr, topic)
			checkProduced(t, s.addr, topic, sent, nil, javaMurmur2)
			group := "weir-compat-kafkajs-" + strings.ToLower(mech)
			got := runTool(t, nil, node, script, "consume", addr, topic, fmt.Sprint(len(sent)), group)
			checkConsumed(t, sent, nil, got, javaMurmur2)
			checkGroupCommitted(t, s.addr, group, topic)

			t.Setenv("WEIR_SEC_PASSWORD", "not-the-Pass-4")
			stderr := runToolFails(t, node, script, "create", addr, topic+"-x", "1")
			if !strings.Contains(stderr, "SASL") || strings.Contains(stderr, "not-the-Pass-4") {
				t.Fatalf("wrong password: kafkajs said:\n%s", tail(stderr))
			}
		})
	}
}

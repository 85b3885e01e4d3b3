package compat

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/weirtest"
)

// Python clients, run with the system interpreter (see systemPython) by
// the scripts in compat/py: each script creates the topic with its own
// admin client, produces with acks=all and the Java-compatible partitioner,
// and consumes by explicit assignment (no group).

// confluent-kafka-python (librdkafka), with idempotence and lz4; the broker
// restarts between produce and consume, and a second consumer reads as a
// group member and commits.
func TestConfluentKafkaPython(t *testing.T) {
	requirePythonModule(t, "confluent_kafka")
	b := startWeir(t)
	const topic = "compat-confluent-python"
	path := testPythonClient(t, b, "confluent_client.py", topic, true)

	const group = "weir-compat-confluent"
	got := runTool(t, nil, systemPython, path, "consume-group", b.Addr(), topic, fmt.Sprint(numRecords), group)
	checkConsumed(t, testRecords(), nil, got, javaMurmur2)
	checkGroupCommitted(t, b.Addr(), group, topic)
}

// kafka-python (pure Python; probes the broker's API versions), with gzip;
// a second consumer reads as a group member and commits.
func TestKafkaPython(t *testing.T) {
	requirePythonModule(t, "kafka")
	b := startWeir(t)
	const topic = "compat-kafka-python"
	path := testPythonClient(t, b, "kafkapython_client.py", topic, false)

	const group = "weir-compat-kafka-python"
	got := runTool(t, nil, systemPython, path, "consume-group", b.Addr(), topic, fmt.Sprint(numRecords), group)
	checkConsumed(t, testRecords(), nil, got, javaMurmur2)
	checkGroupCommitted(t, b.Addr(), group, topic)
}

// testPythonClient runs create, produce and consume with script and checks
// each step; restart restarts the broker between produce and consume. It
// returns the script's path.
func testPythonClient(t *testing.T, b *weirtest.Broker, script, topic string, restart bool) string {
	addr := b.Addr()
	path, err := filepath.Abs(filepath.Join("py", script))
	if err != nil {
		t.Fatal(err)
	}
	runToolRaw(t, nil, systemPython, path, "create", addr, topic, fmt.Sprint(numPartitions))
	checkTopic(t, addr, topic, numPartitions)

	sent := testRecords()
	acked := runTool(t, jsonLines(sent), systemPython, path, "produce", addr, topic)
	checkProduced(t, addr, topic, sent, acked, javaMurmur2)
	if restart {
		b.Restart()
	}

	got := runTool(t, nil, systemPython, path, "consume", addr, topic, fmt.Sprint(len(sent)))
	checkConsumed(t, sent, acked, got, javaMurmur2)
	return path
}

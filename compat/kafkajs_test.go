package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// kafkajs (pure JavaScript; no flexible request versions): the admin client
// creates the topic, a producer with acks=-1, gzip and the Java-compatible
// DefaultPartitioner produces in several multi-partition sends, and a
// consumer reads everything back. kafkajs consumers always join a consumer
// group, so this test also exercises the group coordinator (FindCoordinator,
// JoinGroup, SyncGroup, Heartbeat, OffsetFetch/OffsetCommit, LeaveGroup).
func TestKafkaJS(t *testing.T) {
	node := requireTool(t, "node")
	script, err := filepath.Abs(filepath.Join("js", "kafkajs_client.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed in compat/js/node_modules: %s (or: cd compat/js && npm ci)", installHint)
	}
	addr := startWeir(t).Addr()
	const topic = "compat-kafkajs"

	runToolRaw(t, nil, node, script, "create", addr, topic, fmt.Sprint(numPartitions))
	checkTopic(t, addr, topic, numPartitions)

	sent := testRecords()
	runToolRaw(t, jsonLines(sent), node, script, "produce", addr, topic)
	checkProduced(t, addr, topic, sent, nil, javaMurmur2)

	const group = "weir-compat-kafkajs"
	got := runTool(t, nil, node, script, "consume", addr, topic, fmt.Sprint(len(sent)), group)
	checkConsumed(t, sent, nil, got, javaMurmur2)
	checkGroupCommitted(t, addr, group, topic)
}

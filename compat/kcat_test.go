package compat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// kcat (librdkafka): the driver creates the topic (kcat has no admin API),
// kcat -P produces "key:value" lines with acks=all, snappy compression and
// librdkafka's Java-compatible murmur2_random partitioner (its default,
// consistent_random, is CRC32-based); the broker is restarted (clean
// shutdown, same data dir); then kcat -C -e reads everything back as JSON
// without a consumer group, and kcat -G reads it again as a member of a
// consumer group (balanced consumer), committing its offsets.
func TestKcat(t *testing.T) {
	kcat := requireTool(t, "kcat")
	b := startWeir(t)
	addr := b.Addr()
	const topic = "compat-kcat"
	createTopic(t, addr, topic, numPartitions)

	sent := testRecords()
	var in bytes.Buffer
	for _, r := range sent {
		fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
	}
	runToolRaw(t, in.Bytes(), kcat, "-P", "-b", addr, "-t", topic, "-K:", "-z", "snappy",
		"-X", "acks=all", "-X", "partitioner=murmur2_random", "-X", "message.max.bytes=2000000")
	checkProduced(t, addr, topic, sent, nil, javaMurmur2)

	b.Restart()
	checkProduced(t, addr, topic, sent, nil, javaMurmur2)

	// check.crcs: librdkafka verifies every batch's CRC-32C, which covers
	// the fields the broker rewrites (base offset is outside it; the CRC
	// must still match after the broker stored the batch).
	out := runToolRaw(t, nil, kcat, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-J", "-q", "-X", "check.crcs=true")
	checkConsumed(t, sent, nil, parseKcatJSON(t, out), javaMurmur2)

	// kcat -G: librdkafka's balanced consumer in a group; -e exits once
	// every assigned partition reached its end, and closing the consumer
	// commits the consumed offsets (enable.auto.commit).
	const group = "weir-compat-kcat"
	out = runToolRaw(t, nil, kcat, "-b", addr, "-G", group, "-o", "beginning", "-e", "-J", "-q",
		"-X", "auto.offset.reset=earliest", topic)
	checkConsumed(t, sent, nil, parseKcatJSON(t, out), javaMurmur2)
	checkGroupCommitted(t, addr, group, topic)
}

// Every compression codec librdkafka offers, produced by kcat and read
// back by kcat (which decompresses and checks CRCs): the broker validates
// and stores compressed batches as they come, without decompressing.
func TestKcatCompressionCodecs(t *testing.T) {
	kcat := requireTool(t, "kcat")
	addr := startWeir(t).Addr()
	sent := testRecords()[:60]
	var in bytes.Buffer
	for _, r := range sent {
		fmt.Fprintf(&in, "%s:%s\n", r.Key, r.Value)
	}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "compat-kcat-" + codec
			createTopic(t, addr, topic, numPartitions)
			runToolRaw(t, in.Bytes(), kcat, "-P", "-b", addr, "-t", topic, "-K:", "-z", codec,
				"-X", "acks=all", "-X", "partitioner=murmur2_random", "-X", "linger.ms=20")
			checkProduced(t, addr, topic, sent, nil, javaMurmur2)
			out := runToolRaw(t, nil, kcat, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-J", "-q", "-X", "check.crcs=true")
			checkConsumed(t, sent, nil, parseKcatJSON(t, out), javaMurmur2)
		})
	}
}

func parseKcatJSON(t *testing.T, out []byte) []record {
	t.Helper()
	var got []record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Key       string `json:"key"`
			Payload   string `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("kcat -J line %q: %v", trunc(sc.Text()), err)
		}
		got = append(got, record{Key: m.Key, Value: m.Payload, Partition: m.Partition, Offset: m.Offset})
	}
	return got
}

package compat

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/weirtest"
)

// confluent-kafka-python (librdkafka) transactional producer: two
// transactions committed, one aborted between them; a read_committed
// consumer sees exactly the committed records, a read_uncommitted one all.
func TestConfluentKafkaPythonTransactions(t *testing.T) {
	requirePythonModule(t, "confluent_kafka")
	const topic = "compat-confluent-txn"
	b := weirtest.Start(t, weirtest.TestLog(), weirtest.Topic(topic, 3))
	path, err := filepath.Abs(filepath.Join("py", "txn_confluent.py"))
	if err != nil {
		t.Fatal(err)
	}
	out := runToolRaw(t, nil, systemPython, path, "run", b.Addr(), topic, "3")
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Isolation string   `json:"isolation"`
			Values    []string `json:"values"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad output line %q: %v", line, err)
		}
		got[r.Isolation] = r.Values
	}
	var committed, all []string
	for i := range 20 {
		committed = append(committed, fmt.Sprintf("c%d", i))
	}
	all = append(all, committed...)
	for i := range 10 {
		all = append(all, fmt.Sprintf("a%d", i))
	}
	slices.Sort(committed)
	slices.Sort(all)
	if !slices.Equal(got["read_committed"], committed) {
		t.Fatalf("read_committed saw %v, want %v", got["read_committed"], committed)
	}
	if !slices.Equal(got["read_uncommitted"], all) {
		t.Fatalf("read_uncommitted saw %v, want %v", got["read_uncommitted"], all)
	}
}

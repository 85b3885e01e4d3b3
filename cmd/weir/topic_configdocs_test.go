package main

import (
	"strings"
	"testing"
)

// TestTopicDescribeNotEnforced: `weir topic describe` shows the broker's
// documentation of each config in a NOTE column, where weir marks the
// configs it accepts but does not act on.
func TestTopicDescribeNotEnforced(t *testing.T) {
	addr := startTestBroker(t)
	b := "--brokers=" + addr
	mustCLI(t, "", "topic", "create", b, "notes", "-c", "flush.ms=1000", "-c", "min.insync.replicas=1", "-c", "message.timestamp.after.max.ms=60000")
	out := mustCLI(t, "", "topic", "describe", b, "notes")
	for _, want := range []string{
		`^flush\.ms\s+1000\s+topic\s+NOT ENFORCED by weir`,
		`^min\.insync\.replicas\s+1\s+topic\s+acks=all produces fail with NOT_ENOUGH_REPLICAS`,
		`^message\.timestamp\.after\.max\.ms\s+60000\s+topic\s+with CreateTime`,
	} {
		if !regexpLine(out, want) {
			t.Errorf("describe output has no line matching %s:\n%s", want, out)
		}
	}
	out = mustCLI(t, "", "topic", "describe", b, "notes", "--all-configs")
	if n := strings.Count(out, "NOT ENFORCED by weir"); n < 10 {
		t.Errorf("--all-configs marks %d configs as not enforced:\n%s", n, out)
	}
}

func TestConfigNote(t *testing.T) {
	for in, want := range map[string]string{
		"short":                        "short",
		"First sentence. Second one.":  "First sentence.",
		"spread\n  over   lines. more": "spread over lines.",
		strings.Repeat("x", 200):       strings.Repeat("x", 159) + "…",
	} {
		if got := configNote(in); got != want {
			t.Errorf("configNote(%q) = %q, want %q", in, got, want)
		}
	}
}

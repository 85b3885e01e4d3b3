package stream

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// App.Describe names the topic a windowed store's late records go to — the
// late topic, or the dead-letter topic the App writes them to (per input
// with DLQPerTopic, the input they were first read from, also after a
// repartition) — and that topic is where a late record lands.
func TestWindowDescribeNamesLateTopic(t *testing.T) {
	tests := []struct {
		name    string
		late    LatePolicy
		rekey   bool // GroupBy: the windowed store reads a repartition topic
		opts    []Opt
		want    string // the late destination in Describe
		landsIn string
	}{
		{"dlq", LateToDLQ(), false, nil, "late records: to the dead-letter topic win.dlq,", "win.dlq"},
		{"dlq per topic", LateToDLQ(), false, []Opt{DLQPerTopic()}, "late records: to the dead-letter topic in.dlq,", "in.dlq"},
		{"dlq per topic, repartitioned", LateToDLQ(), true, []Opt{DLQPerTopic()},
			"late records: to the dead-letter topic in.dlq,", "in.dlq"},
		{"late topic", LateToTopic("late-rides"), true, nil, "late records: to topic late-rides,", "late-rides"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuilder()
			in := From(b, "in", String(), Int64())
			g := GroupByKey(in)
			if tt.rekey {
				g = GroupBy(in, func(r Record[string, int64]) (string, error) { return "k" + r.Key, nil })
			}
			w := Tumbling(time.Second)
			store := WindowedStore{Name: "late", Grace: 100 * time.Millisecond, Late: tt.late, Emit: EmitFinal()}
			WindowedCount(g, w, store).ToStream().To("out", WindowedKeys(String(), w), Int64())
			d, err := NewDriver("win", b, nil, append([]Opt{StateDir(t.TempDir())}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			desc := d.App().Describe()
			line := regexp.MustCompile(`(?m)^  store late: .*$`).FindString(desc)
			if !strings.Contains(line, tt.want) {
				t.Fatalf("store line %q does not contain %q; Describe:\n%s", line, tt.want, desc)
			}
			if strings.Contains(line, "to the dead-letter topic,") {
				t.Fatalf("store line names no topic: %q", line)
			}
			// A late record lands in the topic named.
			for _, r := range lateInput {
				if _, err := d.Pipe("in", []byte(r.key), int64Bytes(r.val), time.UnixMilli(r.ts)); err != nil {
					t.Fatal(err)
				}
				if err := d.Process(); err != nil {
					t.Fatal(err)
				}
			}
			got := d.Records(tt.landsIn)
			if len(got) != 1 {
				t.Fatalf("%s holds %d records, want the late one", tt.landsIn, len(got))
			}
			if ts, _ := headerOf(got[0].Headers, HeaderLateWindowStart); ts != strconv.Itoa(0) {
				t.Fatalf("late record's window start header %q, want 0", ts)
			}
		})
	}
}

package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type order struct {
	ID     int    `json:"id"`
	Amount int    `json:"amount"`
	Note   string `json:"note"`
}

// TestPoisonRecordsToDLQ: a record that does not decode and one whose
// processing fails every attempt land in "<input>.dlq" with their metadata;
// the records after them are processed (the partition is not blocked).
func TestPoisonRecordsToDLQ(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { poisonRun(t, g) })
	}
}

func poisonRun(t *testing.T, g Guarantee) {
	b := startBrokerFor(t, g)
	committed := g == ExactlyOnce
	b.createTopic("orders", 1)
	b.createTopic("valid", 1)
	a := b.run("shop", func(bl *Builder) {
		in := From(bl, "orders", String(), JSON[order]())
		Map(in, func(r Record[string, order]) (order, error) {
			if r.Value.Note == "poison" {
				return order{}, Retriable(errors.New("note is poison"))
			}
			if r.Value.Amount < 0 {
				panic("negative amount")
			}
			return r.Value, nil
		}, Named("validate")).To("valid", String(), JSON[order]())
	}, Delivery(g), StateDir(t.TempDir()), MaxAttempts(3), RetryBackoff(time.Millisecond, 4*time.Millisecond),
		CommitInterval(20*time.Millisecond))

	b.produce(
		&kgo.Record{Topic: "orders", Key: []byte("a"), Value: []byte(`{"id":1,"amount":5}`)},
		&kgo.Record{Topic: "orders", Key: []byte("b"), Value: []byte(`{"id":2,`)},
		&kgo.Record{Topic: "orders", Key: []byte("c"), Value: []byte(`{"id":3,"amount":5,"note":"poison"}`),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-t-s-01")}}},
		&kgo.Record{Topic: "orders", Key: []byte("d"), Value: []byte(`{"id":4,"amount":-1}`)},
		&kgo.Record{Topic: "orders", Key: []byte("e"), Value: []byte(`{"id":5,"amount":7}`)},
	)
	valid := b.waitForIso("valid", committed, 20*time.Second, func(r []*kgo.Record) bool { return len(r) >= 2 })
	dlq := b.waitForIso("shop.dlq", committed, 20*time.Second, func(r []*kgo.Record) bool { return len(r) >= 3 })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if len(valid) != 2 || string(valid[0].Key) != "a" || string(valid[1].Key) != "e" {
		t.Fatalf("valid = %v", values(valid))
	}
	want := []struct {
		key, kind, attempts, offset, reason, op string
	}{
		{"b", "decode", "1", "1", "decode value", "source"},
		{"c", "error", "3", "2", "note is poison", "validate"},  // retriable: retried
		{"d", "panic", "1", "3", "negative amount", "validate"}, // a panic is not retried
	}
	for i, w := range want {
		r := dlq[i]
		h := func(k string) string { v, _ := header(r, k); return v }
		if string(r.Key) != w.key || h(HeaderDLQKind) != w.kind || h(HeaderDLQAttempts) != w.attempts ||
			h(HeaderDLQOffset) != w.offset || !strings.Contains(h(HeaderDLQReason), w.reason) ||
			h(HeaderDLQTopic) != "orders" || h(HeaderDLQPartition) != "0" || h(HeaderDLQApp) != "shop" ||
			h(HeaderDLQOperator) != w.op {
			t.Errorf("dlq[%d]: key %q headers %v, want %+v", i, r.Key, r.Headers, w)
		}
		first, err1 := time.Parse(time.RFC3339Nano, h(HeaderDLQFirstFailure))
		last, err2 := time.Parse(time.RFC3339Nano, h(HeaderDLQLastFailure))
		if err1 != nil || err2 != nil || last.Before(first) {
			t.Errorf("dlq[%d]: failure times %q %q", i, h(HeaderDLQFirstFailure), h(HeaderDLQLastFailure))
		}
	}
	if v, _ := header(dlq[1], "traceparent"); v != "00-t-s-01" {
		t.Errorf("original headers not kept in the DLQ: %v", dlq[1].Headers)
	}
	// The poison records are committed past: a restart does not see them again.
	a2 := b.run("shop", func(bl *Builder) {
		From(bl, "orders", String(), JSON[order]()).To("valid", String(), JSON[order]())
	}, Delivery(g), StateDir(t.TempDir()), CommitInterval(20*time.Millisecond))
	b.produce(&kgo.Record{Topic: "orders", Key: []byte("f"), Value: []byte(`{"id":6}`)})
	valid = b.waitForIso("valid", committed, 20*time.Second, func(r []*kgo.Record) bool { return len(r) >= 3 })
	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}
	if len(valid) != 3 || string(valid[2].Key) != "f" {
		t.Fatalf("after restart valid = %v: committed records were replayed", values(valid))
	}
}

// murmur2 is Kafka's Utils.murmur2 (Java), written out independently so the
// test checks the partitioning the App uses against Java's.
func murmur2(data []byte) int32 {
	const m, r = uint32(0x5bd1e995), 24
	h := uint32(0x9747b28c) ^ uint32(len(data))
	n := len(data) / 4
	for i := range n {
		k := uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[4*n:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

func javaPartition(key []byte, n int32) int32 { return (murmur2(key) & 0x7fffffff) % n }

// TestRepartitionKeepsPerKeyOrder: records re-keyed by KeyBy go through the
// repartition topic (created with the input's partition count, partitioned
// as Java clients do) and each new key sees the records of each original
// key in order.
func TestRepartitionKeepsPerKeyOrder(t *testing.T) {
	b := startBroker(t)
	b.createTopic("clicks", 4)
	b.createTopic("sessions", 2)
	a := b.run("order", func(bl *Builder) {
		in := From(bl, "clicks", String(), String())
		byPage := KeyBy(in, func(r Record[string, string]) (string, error) {
			return strings.Split(r.Value, ":")[0], nil
		})
		// The aggregate is the list of "user:seq" seen for the page, in order.
		Aggregate(GroupByKey(byPage), StoreConfig{Name: "seen", TTL: time.Hour},
			func() string { return "" },
			func(r Record[string, string], agg string) (string, error) {
				_, rest, _ := strings.Cut(r.Value, ":")
				return agg + " " + rest, nil
			}).ToStream().To("sessions", String(), String())
	}, StateDir(t.TempDir()), CommitInterval(20*time.Millisecond), MaxPollRecords(50))

	const users, perUser, pages = 12, 40, 5
	var recs []*kgo.Record
	for s := range perUser {
		for u := range users {
			page := fmt.Sprintf("page%d", (u*7+s)%pages)
			recs = append(recs, &kgo.Record{Topic: "clicks", Key: []byte(fmt.Sprintf("user%d", u)),
				Value: []byte(fmt.Sprintf("%s:user%d:%d", page, u, s))})
		}
	}
	b.produce(recs...)
	seen := func(r []*kgo.Record) map[string][]string {
		m := map[string][]string{}
		for _, r := range r {
			m[string(r.Key)] = strings.Fields(string(r.Value))
		}
		return m
	}
	out := b.waitFor("sessions", 30*time.Second, func(r []*kgo.Record) bool {
		n := 0
		for _, l := range seen(r) {
			n += len(l)
		}
		return n >= users*perUser
	})
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	// Per (page, user): sequence numbers strictly increase.
	for page, l := range seen(out) {
		last := map[string]int{}
		for _, us := range l {
			user, seq, _ := strings.Cut(us, ":")
			n, _ := strconv.Atoi(seq)
			if prev, ok := last[user]; ok && n <= prev {
				t.Fatalf("page %s user %s: seq %d after %d", page, user, n, prev)
			}
			last[user] = n
		}
	}
	var rep []*kgo.Record // the data records: watermark markers go to every partition
	for _, r := range b.readAll("order-seen-repartition") {
		if _, marker, _ := ParseWatermarkMarker(r.Headers); !marker {
			rep = append(rep, r)
		}
	}
	if len(rep) != users*perUser {
		t.Fatalf("repartition topic has %d records, want %d", len(rep), users*perUser)
	}
	parts := map[int32]bool{}
	for _, r := range rep {
		parts[r.Partition] = true
		if want := javaPartition(r.Key, 4); r.Partition != want {
			t.Fatalf("key %s in repartition partition %d, Java would pick %d", r.Key, r.Partition, want)
		}
	}
	ctx := t.Context()
	td, err := b.adm.ListTopics(ctx, "order-seen-repartition", "order-seen-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range td {
		if len(d.Partitions) != 4 {
			t.Errorf("%s has %d partitions, want the input's 4", name, len(d.Partitions))
		}
	}
}

// Kafka's UtilsTest vectors for Utils.murmur2.
func TestMurmur2JavaVectors(t *testing.T) {
	for in, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

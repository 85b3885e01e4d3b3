package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMemberInfoRoundTrip(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:8080", "https://q.example/prefix"} {
		got, err := decodeMemberInfo(encodeMemberInfo(memberInfo{QueryEndpoint: ep}))
		if err != nil || got.QueryEndpoint != ep {
			t.Errorf("round trip of %q: %+v, %v", ep, got, err)
		}
	}
	// A later version may append fields: the endpoint still decodes.
	v2 := encodeMemberInfo(memberInfo{QueryEndpoint: "h:1"})
	v2[0] = 2
	if got, err := decodeMemberInfo(append(v2, 9, 9)); err != nil || got.QueryEndpoint != "h:1" {
		t.Errorf("version 2 with more fields: %+v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"version 0":      {0, 0},
		"length too big": {1, 5, 'a'},
		"bad varint":     {1, 0x80},
		"trailing v1":    {1, 1, 'a', 'b'},
	} {
		if _, err := decodeMemberInfo(b); !errors.Is(err, errBadMemberInfo) {
			t.Errorf("%s: err %v, want errBadMemberInfo", name, err)
		}
	}
}

func FuzzDecodeMemberInfo(f *testing.F) {
	f.Add(encodeMemberInfo(memberInfo{QueryEndpoint: "127.0.0.1:1"}))
	f.Add([]byte{1, 0})
	f.Add([]byte{3, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMemberInfo(b)
		if err != nil {
			return
		}
		if b[0] == memberInfoVersion && !bytes.Equal(encodeMemberInfo(m), b) {
			t.Fatalf("decoded %x to %+v, which encodes differently", b, m)
		}
	})
}

// TestAdvertisedUserData: the endpoint an instance advertises rides in the
// task balancer's subscription, and the group view reads it back; metadata
// of another client carries none.
func TestAdvertisedUserData(t *testing.T) {
	ud := encodeMemberInfo(memberInfo{QueryEndpoint: "h:1"})
	tb := &taskBalancer{userData: ud}
	var wm kmsg.ConsumerMemberMetadata
	if err := wm.ReadFrom(tb.JoinGroupMetadata([]string{"events"}, map[string][]int32{"events": {0, 2}}, 7)); err != nil {
		t.Fatal(err)
	}
	if info, err := decodeMemberInfo(appUserData(&wm)); err != nil || info.QueryEndpoint != "h:1" {
		t.Fatalf("app userData: %+v, %v", info, err)
	}
	if ud := appUserData(&kmsg.ConsumerMemberMetadata{UserData: []byte{7, 1, 2}}); ud != nil {
		t.Fatalf("userData of an unknown version yields %q", ud)
	}
	if ud := appUserData(&kmsg.ConsumerMemberMetadata{}); ud != nil {
		t.Fatalf("a member without userData yields %q", ud)
	}
}

func member(id, endpoint string, assigned map[string][]int32) describedMember {
	m := describedMember{id: id, meta: &kmsg.ConsumerMemberMetadata{}, assigned: &kmsg.ConsumerMemberAssignment{}}
	if endpoint != "-" {
		m.meta.UserData = append([]byte{memberUserDataVersion}, encodeMemberInfo(memberInfo{QueryEndpoint: endpoint})...)
	}
	for topic, ps := range assigned {
		m.assigned.Topics = append(m.assigned.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: topic, Partitions: ps})
	}
	return m
}

func TestGroupViewOwnersAndStandbys(t *testing.T) {
	v := newGroupView(true, "b", []describedMember{
		member("c", "c:3", map[string][]int32{"events": {2, 5}}),
		member("a", "a:1", map[string][]int32{"events": {0, 3}}),
		member("b", "-", map[string][]int32{"events": {1, 4}}),
	}, tlog(t))
	if m, ok := v.ownerOf(topicPartition{"events", 3}); !ok || m.id != "a" || m.info.QueryEndpoint != "a:1" {
		t.Errorf("owner of events-3: %+v %v", m, ok)
	}
	if m, ok := v.ownerOf(topicPartition{"events", 4}); !ok || m.id != "b" || m.info.QueryEndpoint != "" {
		t.Errorf("owner of events-4 (no endpoint): %+v %v", m, ok)
	}
	if _, ok := v.ownerOf(topicPartition{"events", 6}); ok {
		t.Error("unassigned partition has an owner")
	}
	// Standbys: the next members in member-id order (a, b, c), wrapping.
	for _, c := range []struct {
		p    int32
		n    int
		want []string
	}{
		{0, 1, []string{"b"}}, {1, 1, []string{"c"}}, {2, 1, []string{"a"}},
		{2, 2, []string{"a", "b"}}, {0, 5, []string{"b", "c"}}, {0, 0, nil}, {6, 1, nil},
	} {
		if got := v.standbysOf(topicPartition{"events", c.p}, c.n); !slices.Equal(got, c.want) {
			t.Errorf("standbys of events-%d (n=%d) = %v, want %v", c.p, c.n, got, c.want)
		}
	}
	// Every instance computes the same placement from the same group.
	w := newGroupView(true, "a", []describedMember{
		member("b", "-", map[string][]int32{"events": {1, 4}}),
		member("a", "a:1", map[string][]int32{"events": {0, 3}}),
		member("c", "c:3", map[string][]int32{"events": {2, 5}}),
	}, tlog(t))
	for p := range int32(6) {
		tp := topicPartition{"events", p}
		if !slices.Equal(v.standbysOf(tp, 1), w.standbysOf(tp, 1)) {
			t.Errorf("placement of %v differs between instances", tp)
		}
	}
	// A member whose userData does not decode routes nowhere.
	bad := member("d", "-", map[string][]int32{"events": {9}})
	bad.meta.UserData = []byte{memberUserDataVersion, 1, 9}
	v = newGroupView(true, "a", []describedMember{bad}, tlog(t))
	if m, ok := v.ownerOf(topicPartition{"events", 9}); !ok || m.info.QueryEndpoint != "" {
		t.Errorf("undecodable member: %+v %v", m, ok)
	}
}

// TestQueryErrorsWithoutBroker: the routing decisions of a query on an App
// whose group view and task state are set by the test.
func TestQueryErrorsWithoutBroker(t *testing.T) {
	b := NewBuilder()
	countTopology(b)
	a, err := NewApp("app", b, Brokers("127.0.0.1:1"), StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := a.Get(ctx, "counts", []byte("k")); !errors.Is(err, ErrNotRunning) || !QueryRetriable(err) {
		t.Fatalf("before Run: %v, want ErrNotRunning (retriable)", err)
	}
	if _, err := a.Range(ctx, "nope", nil, nil, 0); !errors.Is(err, ErrUnknownStore) || QueryRetriable(err) {
		t.Fatalf("unknown store: %v", err)
	}
	const parts = 4
	a.query.partitions = map[string]int32{"counts": parts}
	key := []byte("k07")
	p := keyPartition(key, parts)
	id := a.storeTask(a.stores["counts"], p)

	// No view yet: rebalancing.
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrRebalancing) {
		t.Errorf("no view: %v, want ErrRebalancing", err)
	}
	// Assigned here, not restored yet: restoring.
	a.mu.Lock()
	a.assigned[id] = true
	a.mu.Unlock()
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrRestoring) || !QueryRetriable(err) {
		t.Errorf("assigned, restoring: %v, want ErrRestoring", err)
	}
	a.mu.Lock()
	delete(a.assigned, id)
	a.mu.Unlock()

	view := func(self string, ms ...describedMember) {
		a.query.view.mu.Lock()
		a.query.view.view = newGroupView(true, self, ms, tlog(t))
		a.query.view.mu.Unlock()
	}
	view("me", member("me", "me:1", nil), member("other", "-", map[string][]int32{"events": {p}}))
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrNoRoute) || QueryRetriable(err) {
		t.Errorf("owner without endpoint: %v, want ErrNoRoute", err)
	}
	view("me", member("me", "me:1", map[string][]int32{"events": {p}}))
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrRebalancing) {
		t.Errorf("view names this instance, task not here: %v, want ErrRebalancing", err)
	}
	view("me", member("me", "me:1", nil))
	if _, err := a.Range(ctx, "counts", nil, nil, 0); !errors.Is(err, ErrRebalancing) {
		t.Errorf("partition without owner: %v, want ErrRebalancing", err)
	}
	// The owner's endpoint does not answer: owner unavailable (retriable).
	view("me", member("me", "me:1", nil), member("other", "127.0.0.1:1", map[string][]int32{"events": {p}}))
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrOwnerUnavailable) || !QueryRetriable(err) {
		t.Errorf("owner down: %v, want ErrOwnerUnavailable", err)
	}

	// With AllowStale, the member after the owner (its standby by the
	// placement) answers instead; without, the error stands.
	var asked atomic.Int32
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.URL.Query().Get("stale") != "1" || r.URL.Query().Get("local") != "1" {
			writeError(w, fmt.Errorf("%w: not asked for a stale local read", errBadRequest))
			return
		}
		v, _ := Int64().Encode(42)
		if strings.HasSuffix(r.URL.Path, "/range") {
			writeJSON(w, http.StatusOK, httpRangeResponse{Store: "counts", Entries: []httpEntry{{Key64: key, Value64: v, Partition: p, Stale: true}}})
			return
		}
		writeJSON(w, http.StatusOK, httpGetResponse{Store: "counts", Entry: httpEntry{Key64: key, Value64: v, Partition: p, Stale: true}})
	}))
	defer standby.Close()
	a.cfg.standbyReplicas = 1
	view("me", member("me", "me:1", nil), member("o1", "127.0.0.1:1", map[string][]int32{"events": {p}}),
		member("o2", standby.Listener.Addr().String(), nil))
	e, found, err := a.Get(ctx, "counts", key, AllowStale())
	if n, _ := Int64().Decode(e.Value); err != nil || !found || !e.Stale || n != 42 {
		t.Errorf("stale get with the owner down: %+v found %v err %v", e, found, err)
	}
	if _, _, err := a.Get(ctx, "counts", key); !errors.Is(err, ErrOwnerUnavailable) {
		t.Errorf("get without AllowStale, owner down: %v", err)
	}
	// Range: the owner of every partition is down (or unknown); only p
	// has a standby copy, so the stale range fails as a whole.
	if _, err := a.Range(ctx, "counts", nil, nil, 0, AllowStale()); !QueryRetriable(err) {
		t.Errorf("stale range with partitions lacking copies: %v, want a retriable error", err)
	}
	if asked.Load() == 0 {
		t.Fatal("the standby instance was never asked")
	}
}

// TestKeyPartitionMatchesProducer: a key's partition is where the App's
// partitioner (and the test producer) put it.
func TestKeyPartitionMatchesProducer(t *testing.T) {
	pt := appPartitioner{byKey: kgo.StickyKeyPartitioner(nil)}.ForTopic("x")
	var ks [][]byte
	for i := range 200 {
		ks = append(ks, []byte(key(i)))
	}
	for l := range 12 { // every tail length, and bytes >= 0x80 (Java's signed bytes)
		ks = append(ks, bytes.Repeat([]byte{0xff - byte(l)}, l))
	}
	for _, in := range []string{"21", "foobar", "a-little-bit-long-string", "a-little-bit-longer-string", "abc"} {
		ks = append(ks, []byte(in))
	}
	for _, k := range ks {
		if got, want := int32(murmur2Hash(k)), murmur2(k); got != want { // the test's independent Java port
			t.Fatalf("murmur2Hash(%q) = %d, want %d", k, got, want)
		}
		for _, n := range []int32{1, 3, 4, 16, 1000} {
			if got, want := keyPartition(k, n), int32(pt.Partition(&kgo.Record{Key: k}, int(n))); got != want {
				t.Fatalf("key %s over %d: %d, partitioner %d", k, n, got, want)
			}
		}
	}
}

// tlog adapts t.Log to the slog-style log function newGroupView takes.
func tlog(t *testing.T) func(msg string, args ...any) {
	return func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
}

// TestQueryServerAddressTaken: Run fails at once, with a clear error, when
// the query server's address is taken.
func TestQueryServerAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := NewBuilder()
	countTopology(b)
	a, err := NewApp("app", b, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), QueryServer(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Run(ctx); err == nil || !strings.Contains(err.Error(), "query server") {
		t.Fatalf("Run with the address taken: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run waited for its context instead of failing")
	}
}

// TestMemberQueryURL: a tool reading a group's members finds each App
// instance's query API in its subscription metadata, and is told when a
// member is not an App's.
func TestMemberQueryURL(t *testing.T) {
	meta := func(ud []byte) []byte {
		return (&taskBalancer{userData: ud}).JoinGroupMetadata([]string{"events"}, nil, 1)
	}
	for _, c := range []struct {
		endpoint, url string
	}{{"127.0.0.1:8080", "http://127.0.0.1:8080"}, {"https://h/app", "https://h/app"}, {"", ""}} {
		got, err := MemberQueryURL(meta(encodeMemberInfo(memberInfo{QueryEndpoint: c.endpoint})))
		if err != nil || got != c.url {
			t.Errorf("endpoint %q: %q, %v; want %q", c.endpoint, got, err, c.url)
		}
	}
	plain := kmsg.NewConsumerMemberMetadata()
	plain.Topics = []string{"events"}
	for name, b := range map[string][]byte{
		"a plain consumer":   plain.AppendTo(nil),
		"bad member info":    meta([]byte{1, 9}),
		"not metadata":       {0xff},
		"no metadata at all": nil,
	} {
		if _, err := MemberQueryURL(b); !errors.Is(err, errBadMemberInfo) && !errors.Is(err, errBadAssignment) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

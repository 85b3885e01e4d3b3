package quota

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

func sp(s string) *string { return &s }

func open(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	if err := vfs.MkdirAllDurable(fs, "/d"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(fs, "/d")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func set(t *testing.T, s *Store, e Entity, key string, v float64) {
	t.Helper()
	if err := s.Alter(e, []Op{{Key: key, Value: v}}, false); err != nil {
		t.Fatal(err)
	}
}

// Kafka's precedence, level by level: each step removes the most specific
// entity left and checks the next one applies.
func TestResolvePrecedence(t *testing.T) {
	s := open(t, vfs.NewCrashableMem())
	u, c := Component{Type: EntityUser, Name: sp("alice")}, Component{Type: EntityClientID, Name: sp("app")}
	du, dc := Component{Type: EntityUser}, Component{Type: EntityClientID}
	levels := []struct {
		e          Entity
		user, clID string
	}{
		{Entity{u, c}, "alice", "app"},
		{Entity{u, dc}, "alice", "app"},
		{Entity{u}, "alice", ""},
		{Entity{du, c}, "alice", "app"},
		{Entity{du, dc}, "alice", "app"},
		{Entity{du}, "alice", ""},
		{Entity{c}, "", "app"},
		{Entity{dc}, "", "app"},
	}
	for i, l := range levels {
		set(t, s, l.e, ProducerByteRate, float64(1000+i))
	}
	for i, l := range levels {
		a, ok := s.Resolve(ProducerByteRate, "alice", "app")
		if !ok || a.Bound != float64(1000+i) || a.User != l.user || a.ClientID != l.clID {
			t.Fatalf("level %d (%s): got %+v %v", i+1, l.e, a, ok)
		}
		if err := s.Alter(l.e, []Op{{Key: ProducerByteRate, Remove: true}}, false); err != nil {
			t.Fatal(err)
		}
	}
	if a, ok := s.Resolve(ProducerByteRate, "alice", "app"); ok {
		t.Fatalf("no quota left, resolved %+v", a)
	}
	// Another key of the same entity does not shadow.
	set(t, s, Entity{u}, ConsumerByteRate, 5)
	set(t, s, Entity{dc}, ProducerByteRate, 7)
	if a, ok := s.Resolve(ProducerByteRate, "alice", "x"); !ok || a.Bound != 7 || a.User != "" || a.ClientID != "x" {
		t.Fatalf("client default: %+v %v", a, ok)
	}
}

func TestAlterDescribeDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := open(t, fs)
	set(t, s, Entity{{Type: EntityUser, Name: sp("a")}}, ProducerByteRate, 1024)
	set(t, s, Entity{{Type: EntityClientID, Name: sp("c")}, {Type: EntityUser, Name: sp("a")}}, RequestPercentage, 12.5)
	set(t, s, Entity{{Type: EntityUser}}, ConsumerByteRate, 2048)

	for _, bad := range []struct {
		e   Entity
		ops []Op
	}{
		{Entity{{Type: "ip", Name: sp("1.2.3.4")}}, []Op{{Key: ProducerByteRate, Value: 1}}},
		{Entity{{Type: EntityUser}, {Type: EntityUser}}, []Op{{Key: ProducerByteRate, Value: 1}}},
		{Entity{{Type: EntityUser}}, []Op{{Key: "controller_mutation_rate", Value: 1}}},
		{Entity{{Type: EntityUser}}, []Op{{Key: ProducerByteRate, Value: -1}}},
		{Entity{{Type: EntityUser}}, []Op{{Key: ProducerByteRate, Value: 1.5}}},
		{Entity{{Type: EntityUser}}, []Op{{Key: ProducerByteRate, Value: math.NaN()}}},
		{nil, []Op{{Key: ProducerByteRate, Value: 1}}},
	} {
		if err := s.Alter(bad.e, bad.ops, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s %+v: err %v", bad.e, bad.ops, err)
		}
	}
	// validateOnly changes nothing.
	if err := s.Alter(Entity{{Type: EntityUser, Name: sp("z")}}, []Op{{Key: ProducerByteRate, Value: 1}}, true); err != nil {
		t.Fatal(err)
	}

	all, err := s.Describe(nil, false)
	if err != nil || len(all) != 3 {
		t.Fatalf("describe all: %v %v", all, err)
	}
	users, _ := s.Describe([]FilterComponent{{Type: EntityUser, Match: MatchSpecified}}, false)
	if len(users) != 2 {
		t.Fatalf("specified users: %v", users)
	}
	strict, _ := s.Describe([]FilterComponent{{Type: EntityUser, Match: MatchSpecified}}, true)
	if len(strict) != 1 || strict[0].Values[ProducerByteRate] != 1024 {
		t.Fatalf("strict specified users: %v", strict)
	}
	def, _ := s.Describe([]FilterComponent{{Type: EntityUser, Match: MatchDefault}}, false)
	if len(def) != 1 || def[0].Values[ConsumerByteRate] != 2048 {
		t.Fatalf("default user: %v", def)
	}
	exact, _ := s.Describe([]FilterComponent{{Type: EntityClientID, Match: MatchExact, Name: sp("c")}}, false)
	if len(exact) != 1 || exact[0].Values[RequestPercentage] != 12.5 {
		t.Fatalf("client c: %v", exact)
	}
	if _, err := s.Describe([]FilterComponent{{Type: EntityUser, Match: MatchExact}}, false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exact without name: %v", err)
	}

	s2 := open(t, fs.CrashClone())
	again, _ := s2.Describe(nil, false)
	if len(again) != 3 {
		t.Fatalf("after crash: %v", again)
	}
	if a, ok := s2.Resolve(ConsumerByteRate, "someone", "x"); !ok || a.Bound != 2048 || a.User != "someone" {
		t.Fatalf("user default after crash: %+v %v", a, ok)
	}
}

// A client that waits out every throttle time it is given stays within
// 10% of its quota over any 10 s once its first burst is spent, and within
// quota × 10 s + one burst + one request from the start (simulated time).
func TestThrottleKeepsClientAtQuota(t *testing.T) {
	for _, tc := range []struct {
		bound, chunk float64
	}{{100_000, 16_384}, {1_000_000, 1 << 20}, {10_240, 1000}} {
		s := NewSensors(0)
		a := Applied{Bound: tc.bound, User: "u"}
		start := time.Unix(0, 0)
		now := start
		type send struct {
			at time.Time
			n  float64
		}
		var sends []send
		for now.Sub(start) < 120*time.Second {
			sends = append(sends, send{now, tc.chunk})
			d := s.Record(now, ProducerByteRate, a, tc.chunk)
			now = now.Add(time.Millisecond + d) // 1 ms per request, then the throttle
		}
		var first float64
		for _, sd := range sends {
			if sd.at.Sub(start) < 10*time.Second {
				first += sd.n
			}
		}
		if first > tc.bound*11+tc.chunk || first < tc.bound*10 {
			t.Errorf("bound %v chunk %v: first 10 s carried %.0f bytes", tc.bound, tc.chunk, first)
		}
		for from := time.Second; from+10*time.Second <= 120*time.Second; from += 500 * time.Millisecond {
			var total float64
			for _, sd := range sends {
				if off := sd.at.Sub(start); off >= from && off < from+10*time.Second {
					total += sd.n
				}
			}
			got := total / 10
			if math.Abs(got-tc.bound)/tc.bound > 0.10 {
				t.Errorf("bound %v chunk %v: %v..%v: %.0f B/s, more than 10%% off", tc.bound, tc.chunk, from, from+10*time.Second, got)
			}
		}
	}
}

func TestThrottleOtherClientsUnaffected(t *testing.T) {
	s := NewSensors(0)
	now := time.Unix(0, 0)
	hog := Applied{Bound: 1000, User: "hog"}
	if d := s.Record(now, ProducerByteRate, hog, 1000); d != 0 {
		t.Fatalf("first burst throttled %v", d)
	}
	if d := s.Record(now, ProducerByteRate, hog, 500); d != 500*time.Millisecond {
		t.Fatalf("500 bytes of debt at 1000 B/s: throttle %v", d)
	}
	for range 100 {
		s.Record(now, ProducerByteRate, hog, 10_000)
	}
	if d := s.Record(now, ProducerByteRate, hog, 1); d != MaxThrottle {
		t.Fatalf("hog throttle %v, want the cap", d)
	}
	// The debt beyond the cap is not forgiven.
	if d := s.Record(now.Add(MaxThrottle), ProducerByteRate, hog, 1); d != MaxThrottle {
		t.Fatalf("after one capped wait: %v", d)
	}
	if d := s.Record(now, ProducerByteRate, Applied{Bound: 1000, User: "other"}, 1000); d != 0 {
		t.Fatalf("other user throttled %v", d)
	}
}

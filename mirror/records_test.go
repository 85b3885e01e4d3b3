package mirror

import (
	"errors"
	"testing"
)

func TestSyncRoundTrip(t *testing.T) {
	s := offsetSync{Version: syncVersion, Topic: "orders", Partition: 2, Target: "dc1.orders", Source: 10, TargetOffset: 7,
		WrittenMs: 1000, LastTimestampMs: -1, Restart: true}
	r := s.record("weir-mirror.x.progress")
	got, err := decodeSync(r.Key, r.Value)
	if err != nil || got != s {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", s, got, err)
	}
	for name, kv := range map[string][2]string{
		"not json":      {"", "{"},
		"version":       {"", `{"v":2,"topic":"a","target":"a"}`},
		"no topic":      {"", `{"v":1,"target":"a"}`},
		"negative":      {"", `{"v":1,"topic":"a","target":"a","source_offset":-1}`},
		"key mismatch":  {"b/0", `{"v":1,"topic":"a","target":"a"}`},
		"slash in name": {"", `{"v":1,"topic":"a/b","target":"a"}`},
	} {
		var key []byte
		if kv[0] != "" {
			key = []byte(kv[0])
		}
		if _, err := decodeSync(key, []byte(kv[1])); !errors.Is(err, ErrBadSyncRecord) {
			t.Errorf("%s: err %v, want ErrBadSyncRecord", name, err)
		}
	}
}

// FuzzDecodeSync: any bytes decode to a valid sync or ErrBadSyncRecord,
// never a panic; a valid one re-encodes to itself.
func FuzzDecodeSync(f *testing.F) {
	s := offsetSync{Version: syncVersion, Topic: "t", Partition: 1, Target: "p.t", Source: 5, TargetOffset: 3, LastTimestampMs: -1}
	r := s.record("x")
	f.Add(r.Key, r.Value)
	f.Add([]byte("t/1"), []byte(`{"v":1}`))
	f.Add([]byte(nil), []byte(`null`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		got, err := decodeSync(key, value)
		if err != nil {
			if !errors.Is(err, ErrBadSyncRecord) {
				t.Fatalf("error %v is not ErrBadSyncRecord", err)
			}
			return
		}
		r := got.record("x")
		again, err := decodeSync(r.Key, r.Value)
		if err != nil || again != got {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, got)
		}
	})
}

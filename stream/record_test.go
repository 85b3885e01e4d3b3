package stream

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// upperKeys is a key codec that does not carry encodings (see encoded): it
// encodes a string upper-cased, so a reused input encoding would show.
type upperKeys struct{}

func (upperKeys) Encode(v string) ([]byte, error) { return []byte(strings.ToUpper(v)), nil }
func (upperKeys) Decode(b []byte) (string, error) { return string(b), nil }

// noisyString decodes strings as String does but is another codec value:
// a record carrying String's bytes must not pass them off as its encoding.
type noisyString struct{ prefix string }

func (c noisyString) Encode(v string) ([]byte, error) { return []byte(c.prefix + v), nil }
func (c noisyString) Decode(b []byte) (string, error) { return string(b), nil }

// TestCarriedEncodings checks that the encodings a record carries are used
// only while they are what the sink's or store's codec would produce: after
// a key change (KeyBy), a value change (Map after Count), or with another
// codec, the sink encodes; with the same codecs it sends the stored bytes.
func TestCarriedEncodings(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *Builder)
		// want maps topic -> key -> value (rendered with render)
		want map[string]map[string]string
	}{{
		name: "count to sink with the store's codecs",
		build: func(b *Builder) {
			Count(GroupByKey(From(b, "in", String(), String()), Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour}).
				ToStream().To("out", String(), Int64())
		},
		want: map[string]map[string]string{"out": {"a": "2", "b": "1"}, "app-c-changelog": {"a": "2", "b": "1"}},
	}, {
		name: "key changed before the sink",
		build: func(b *Builder) {
			KeyBy(From(b, "in", String(), String()), func(r Record[string, string]) (string, error) {
				return "k-" + r.Key, nil
			}).To("out", String(), String())
		},
		want: map[string]map[string]string{"out": {"k-a": "v3", "k-b": "v2"}},
	}, {
		name: "value changed after the count",
		build: func(b *Builder) {
			Map(Count(GroupByKey(From(b, "in", String(), String()), Codecs(String(), String())), StoreConfig{Name: "c", TTL: time.Hour}).ToStream(),
				func(r Record[string, int64]) (int64, error) { return r.Value * 10, nil }).
				To("out", String(), Int64())
		},
		want: map[string]map[string]string{"out": {"a": "20", "b": "10"}},
	}, {
		name: "store key codec differs from the source's",
		build: func(b *Builder) {
			Count(GroupByKey(From(b, "in", String(), String()), Codecs(upperKeys{}, String())), StoreConfig{Name: "c", TTL: time.Hour}).
				ToStream().To("out", noisyString{prefix: "x-"}, Int64())
		},
		want: map[string]map[string]string{"out": {"x-a": "2", "x-b": "1"}, "app-c-changelog": {"A": "2", "B": "1"}},
	}, {
		name: "sink key codec differs from the source's",
		build: func(b *Builder) {
			From(b, "in", String(), String()).Filter(func(Record[string, string]) (bool, error) { return true, nil }).
				To("out", noisyString{prefix: "y-"}, String())
		},
		want: map[string]map[string]string{"out": {"y-a": "v3", "y-b": "v2"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			tc.build(b)
			d, err := NewDriver("app", b, nil, StateDir(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for i, k := range []string{"a", "b", "a"} {
				if _, err := d.Pipe("in", []byte(k), []byte("v"+string(rune('1'+i))), time.Unix(int64(i), 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Process(); err != nil {
				t.Fatal(err)
			}
			for topic, want := range tc.want {
				got := map[string]string{}
				for _, r := range d.Records(topic) {
					got[string(r.Key)] = render(r.Value)
				}
				if len(got) != len(want) {
					t.Errorf("%s: got %v, want %v", topic, got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: key %q = %q, want %q (all: %v)", topic, k, got[k], v, got)
					}
				}
			}
		})
	}
}

// render shows an 8-byte value as the Int64 it encodes (the test's other
// values are two bytes), anything else as text.
func render(b []byte) string {
	if n, err := Int64().Decode(b); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return string(b)
}

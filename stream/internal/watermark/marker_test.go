package watermark

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The header layout, written out: a change here is a format change.
func TestMarkerLayout(t *testing.T) {
	tests := []struct {
		m   Marker
		hex string
	}{
		{Marker{Writer: 3, Writers: 12, Watermark: 1764633600000}, "01" + "00" + "00000003" + "0000000c" + "0000019adc5be000"},
		{Marker{Writer: 0, Writers: 1, Watermark: math.MinInt64, Idle: true}, "01" + "01" + "00000000" + "00000001" + "8000000000000000"},
		{Marker{Writer: 1, Writers: 2, Watermark: -1}, "01" + "00" + "00000001" + "00000002" + "ffffffffffffffff"},
	}
	for _, tt := range tests {
		b := AppendMarker(nil, tt.m)
		if got := hex.EncodeToString(b); got != tt.hex {
			t.Errorf("AppendMarker(%+v) = %s, want %s", tt.m, got, tt.hex)
		}
		m, err := DecodeMarker(b)
		if err != nil || m != tt.m {
			t.Errorf("DecodeMarker(%s) = %+v, %v; want %+v", tt.hex, m, err, tt.m)
		}
	}
}

func TestMarkerDecodeErrors(t *testing.T) {
	good := AppendMarker(nil, Marker{Writer: 1, Writers: 2, Watermark: 5})
	bad := map[string][]byte{
		"empty":     nil,
		"short":     good[:17],
		"long":      append(bytes.Clone(good), 0),
		"version":   append([]byte{2}, good[1:]...),
		"flags":     append([]byte{1, 2}, good[2:]...),
		"writer":    AppendMarker(nil, Marker{Writer: 2, Writers: 2}),
		"0 writers": AppendMarker(nil, Marker{Writer: 0, Writers: 0}),
	}
	for name, b := range bad {
		if _, err := DecodeMarker(b); !errors.Is(err, ErrMarker) {
			t.Errorf("%s: err = %v, want ErrMarker", name, err)
		}
	}
}

func TestMarkerRecord(t *testing.T) {
	m := Marker{Writer: 2, Writers: 3, Watermark: 42}
	r := MarkerRecord("rep", 7, m)
	if r.Topic != "rep" || r.Partition != 7 || r.Key != nil || r.Value != nil {
		t.Fatalf("marker record %+v", r)
	}
	if !IsMarker(r) {
		t.Fatal("IsMarker(marker) = false")
	}
	got, ok, err := MarkerOf(r)
	if !ok || err != nil || got != m {
		t.Fatalf("MarkerOf = %+v, %v, %v", got, ok, err)
	}

	data := &kgo.Record{Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-x")}}}
	if IsMarker(data) {
		t.Fatal("IsMarker(data record) = true")
	}
	if _, ok, err := MarkerOf(data); ok || err != nil {
		t.Fatalf("MarkerOf(data) = %v, %v", ok, err)
	}
	broken := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a"}, {Key: MarkerHeader, Value: []byte{1}}}}
	if !IsMarker(broken) {
		t.Fatal("a record with the reserved header is a marker, even a malformed one")
	}
	if _, ok, err := MarkerOf(broken); !ok || !errors.Is(err, ErrMarker) {
		t.Fatalf("MarkerOf(malformed) = %v, %v", ok, err)
	}
}

func FuzzDecodeMarker(f *testing.F) {
	f.Add(AppendMarker(nil, Marker{Writer: 3, Writers: 12, Watermark: 1764633600000}))
	f.Add(AppendMarker(nil, Marker{Writers: 1, Idle: true}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMarker(b)
		if err != nil {
			return
		}
		if m.Writer >= m.Writers {
			t.Fatalf("decoded writer %d of %d", m.Writer, m.Writers)
		}
		if again := AppendMarker(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}

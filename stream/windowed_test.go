package stream

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
	"time"
)

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// The expected bytes are written out from the layouts of Kafka Streams'
// WindowKeySchema.toBinary (key | start) and SessionKeySchema.toBinary
// (key | end | start), big-endian longs.
func TestTimeWindowedKafkaBytes(t *testing.T) {
	c := TimeWindowed(String(), 5*time.Second)
	tests := []struct {
		w   Windowed[string]
		hex string
	}{
		{Windowed[string]{Key: "A", Start: ms(8000), End: ms(13000)}, "41" + "0000000000001f40"},
		{Windowed[string]{Key: "", Start: ms(0), End: ms(5000)}, "0000000000000000"},
		{Windowed[string]{Key: "ab", Start: ms(-1000), End: ms(4000)}, "6162" + "fffffffffffffc18"},
		{Windowed[string]{Key: "z", Start: ms(1764633600000), End: ms(1764633605000)}, "7a" + "0000019adc5be000"},
	}
	for _, tt := range tests {
		b, err := c.Encode(tt.w)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != tt.hex {
			t.Errorf("Encode(%+v) = %s, want %s", tt.w, got, tt.hex)
		}
		w, err := c.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if w.Key != tt.w.Key || !w.Start.Equal(tt.w.Start) || !w.End.Equal(tt.w.End) {
			t.Errorf("Decode(%s) = %+v, want %+v", tt.hex, w, tt.w)
		}
	}
}

func TestTimeWindowedEndSaturates(t *testing.T) {
	c := TimeWindowed(String(), time.Hour)
	b, _ := hex.DecodeString("41" + "7ffffffffffffff0")
	w, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if w.End.UnixMilli() != math.MaxInt64 {
		t.Fatalf("End = %d, want MaxInt64 (Kafka's timeWindowForSize)", w.End.UnixMilli())
	}
}

func TestTimeWindowedEndFunc(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	nextMidnight := func(s time.Time) time.Time {
		l := s.In(berlin)
		return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, berlin)
	}
	c := TimeWindowedEnd(String(), nextMidnight)
	day := time.Date(2026, 10, 25, 0, 0, 0, 0, berlin) // 25 hours: CEST -> CET
	b, err := c.Encode(Windowed[string]{Key: "k", Start: day, End: nextMidnight(day)})
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]byte("k"), startSuffix(day)...); !bytes.Equal(b, want) {
		t.Fatalf("Encode = %x, want %x", b, want)
	}
	w, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.End.Sub(w.Start); got != 25*time.Hour {
		t.Fatalf("decoded window lasts %v, want 25h", got)
	}
}

// startSuffix is the 8-byte start suffix, written out independently.
func startSuffix(start time.Time) []byte {
	v := uint64(start.UnixMilli())
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		out[i] = byte(v)
		v >>= 8
	}
	return out
}

func TestSessionWindowedKafkaBytes(t *testing.T) {
	c := SessionWindowed(String())
	w := Windowed[string]{Key: "A", Start: ms(3000), End: ms(8000)}
	b, err := c.Encode(w)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(b), "41"+"0000000000001f40"+"0000000000000bb8"; got != want {
		t.Fatalf("Encode = %s, want %s (key | end | start)", got, want)
	}
	back, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Key != "A" || !back.Start.Equal(w.Start) || !back.End.Equal(w.End) {
		t.Fatalf("Decode = %+v, want %+v", back, w)
	}
	// A single-record session: start == end.
	b, _ = c.Encode(Windowed[string]{Key: "", Start: ms(7), End: ms(7)})
	if got, want := hex.EncodeToString(b), "0000000000000007"+"0000000000000007"; got != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
}

func TestWindowedDecodeErrors(t *testing.T) {
	tc := TimeWindowed(String(), time.Second)
	sc := SessionWindowed(String())
	for n := 0; n < 8; n++ {
		if _, err := tc.Decode(make([]byte, n)); !errors.Is(err, errWindowedShort) {
			t.Errorf("time Decode(%d bytes) err = %v, want errWindowedShort", n, err)
		}
	}
	for n := 0; n < 16; n++ {
		if _, err := sc.Decode(make([]byte, n)); !errors.Is(err, errWindowedShort) {
			t.Errorf("session Decode(%d bytes) err = %v, want errWindowedShort", n, err)
		}
	}
	bad, _ := hex.DecodeString("41" + "0000000000000001" + "0000000000000002")
	if _, err := sc.Decode(bad); !errors.Is(err, errSessionOrder) {
		t.Errorf("session end < start: err = %v, want errSessionOrder", err)
	}
	// The key codec's error passes through.
	ic := TimeWindowed(Int64(), time.Second)
	if _, err := ic.Decode(make([]byte, 11)); !errors.Is(err, errInt64Len) {
		t.Errorf("int64 key of 3 bytes: err = %v, want errInt64Len", err)
	}
}

func FuzzTimeWindowedDecode(f *testing.F) {
	f.Add([]byte("A\x00\x00\x00\x00\x00\x00\x1f\x40"))
	f.Add([]byte{})
	f.Add([]byte("\x7f\xff\xff\xff\xff\xff\xff\xff"))
	c := TimeWindowed(String(), 10*time.Second)
	f.Fuzz(func(t *testing.T, b []byte) { checkWindowedRoundTrip(t, c, b) })
}

func FuzzSessionWindowedDecode(f *testing.F) {
	f.Add([]byte("A\x00\x00\x00\x00\x00\x00\x1f\x40\x00\x00\x00\x00\x00\x00\x0b\xb8"))
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	c := SessionWindowed(String())
	f.Fuzz(func(t *testing.T, b []byte) { checkWindowedRoundTrip(t, c, b) })
}

// checkWindowedRoundTrip: bytes that decode hold a window that does not end
// before it starts, and encode back to themselves.
func checkWindowedRoundTrip(t *testing.T, c Codec[Windowed[string]], b []byte) {
	w, err := c.Decode(b)
	if err != nil {
		return
	}
	if w.End.Before(w.Start) {
		t.Fatalf("End %v before Start %v", w.End, w.Start)
	}
	again, err := c.Encode(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoded %x, read %x", again, b)
	}
}

package stream

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAppendEncodersMatchEncode checks appendEncoder's invariant for every
// codec that has one: encodeSize is the length of Encode's bytes, and
// appendEncode appends exactly those bytes after what the buffer holds. A
// windowed codec of a key codec without one has none.
func TestAppendEncodersMatchEncode(t *testing.T) {
	strs := []string{"", "a", "zone-000042", strings.Repeat("x", 1000), "ü€"}
	ints := []int64{0, 1, -1, 1 << 40, -1 << 62}
	wins := func(keys []string) []Windowed[string] {
		var ws []Windowed[string]
		for i, k := range keys {
			s := int64(i*7919) - 3000
			ws = append(ws, Windowed[string]{Key: k, Start: ms(s), End: ms(s + 10_000)})
		}
		return ws
	}
	intWins := []Windowed[int64]{{Key: -5, Start: ms(-1), End: ms(4)}, {Key: 1 << 50, Start: ms(1764633600000), End: ms(1764633610000)}}
	check := func(name string, c any, vs []any) {
		t.Helper()
		for i, v := range vs {
			var enc, app []byte
			var size int
			switch c := c.(type) {
			case Codec[string]:
				a := appenderOf(c)
				if a == nil {
					t.Fatalf("%s: no appender", name)
				}
				b, err := c.Encode(v.(string))
				if err != nil {
					t.Fatal(err)
				}
				enc, size, app = b, a.encodeSize(v.(string)), a.appendEncode([]byte("pre"), v.(string))
			case Codec[int64]:
				a := appenderOf(c)
				if a == nil {
					t.Fatalf("%s: no appender", name)
				}
				b, err := c.Encode(v.(int64))
				if err != nil {
					t.Fatal(err)
				}
				enc, size, app = b, a.encodeSize(v.(int64)), a.appendEncode([]byte("pre"), v.(int64))
			case Codec[Windowed[string]]:
				a := appenderOf(c)
				if a == nil {
					t.Fatalf("%s: no appender", name)
				}
				b, err := c.Encode(v.(Windowed[string]))
				if err != nil {
					t.Fatal(err)
				}
				enc, size, app = b, a.encodeSize(v.(Windowed[string])), a.appendEncode([]byte("pre"), v.(Windowed[string]))
			case Codec[Windowed[int64]]:
				a := appenderOf(c)
				if a == nil {
					t.Fatalf("%s: no appender", name)
				}
				b, err := c.Encode(v.(Windowed[int64]))
				if err != nil {
					t.Fatal(err)
				}
				enc, size, app = b, a.encodeSize(v.(Windowed[int64])), a.appendEncode([]byte("pre"), v.(Windowed[int64]))
			default:
				t.Fatalf("%s: codec %T", name, c)
			}
			if size != len(enc) {
				t.Errorf("%s #%d: encodeSize %d, Encode gives %d bytes", name, i, size, len(enc))
			}
			if want := append([]byte("pre"), enc...); !bytes.Equal(app, want) {
				t.Errorf("%s #%d: appendEncode gives %x, want %x", name, i, app, want)
			}
		}
	}
	var sv, iv, wv, iwv []any
	for _, s := range strs {
		sv = append(sv, s)
	}
	for _, n := range ints {
		iv = append(iv, n)
	}
	for _, w := range wins(strs) {
		wv = append(wv, w)
	}
	for _, w := range intWins {
		iwv = append(iwv, w)
	}
	check("String", String(), sv)
	check("Int64", Int64(), iv)
	check("TimeWindowed(String)", TimeWindowed(String(), 10*time.Second), wv)
	check("TimeWindowedEnd(String)", TimeWindowedEnd(String(), func(s time.Time) time.Time { return s.Add(time.Hour) }), wv)
	check("WindowedKeys(String, Hopping)", WindowedKeys(String(), Hopping(10*time.Second, 2*time.Second)), wv)
	check("SessionWindowed(String)", SessionWindowed(String()), wv)
	check("TimeWindowed(Int64)", TimeWindowed(Int64(), 5*time.Millisecond), iwv)
	check("SessionWindowed(Int64)", SessionWindowed(Int64()), iwv)

	if appenderOf(TimeWindowed(upperKeys{}, time.Second)) != nil || appenderOf(SessionWindowed(upperKeys{})) != nil {
		t.Error("a windowed codec of a key codec without an appender has one")
	}
	if appenderOf(JSON[int64]()) != nil || appenderOf(Bytes()) != nil {
		t.Error("JSON or Bytes has an appender")
	}
}

// TestSinkSlabBytes runs records through sinks that write their keys and
// values into the task's output slab: an empty key stays an empty key (not
// a null one, which partitions differently), even as the task's first
// output, and every record keeps its own bytes while the slab fills, moves
// to a new slab, and serves keys too large for it.
func TestSinkSlabBytes(t *testing.T) {
	b := NewBuilder()
	in := From(b, "in", String(), String())
	// New keys and values: nothing the source carries reaches the sink.
	keyed := KeyBy(in, func(r Record[string, string]) (string, error) {
		if r.Value == "empty" {
			return "", nil
		}
		return r.Value, nil
	})
	Map(keyed, func(r Record[string, string]) (string, error) { return r.Value + "!", nil }).To("out", String(), String())
	d, err := NewDriver("app", b, nil, StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var want []string
	vals := []string{"empty"}
	for i := range 700 {
		v := fmt.Sprintf("v%04d-%s", i, strings.Repeat("y", i%23))
		if i%250 == 0 {
			v += strings.Repeat("L", outSlabMax+i)
		}
		vals = append(vals, v)
	}
	for _, v := range vals {
		if _, err := d.Pipe("in", []byte("k"), []byte(v), t0); err != nil {
			t.Fatal(err)
		}
		if v == "empty" {
			v = ""
		}
		want = append(want, v)
	}
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	got := d.Records("out")
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	if got[0].Key == nil || len(got[0].Key) != 0 {
		t.Errorf("empty key written as %q (nil %v), want an empty, non-null key", got[0].Key, got[0].Key == nil)
	}
	for i, r := range got {
		if string(r.Key) != want[i] || string(r.Value) != vals[i]+"!" {
			t.Fatalf("record %d: %q = %q, want %q = %q", i, r.Key, r.Value, want[i], vals[i]+"!")
		}
	}
}

// TestEmitPathAllocs checks what the per-result path allocates: nothing to
// wrap a nil error with its operator, and (amortised over a slab) nothing
// for a windowed key and an Int64 value a sink encodes.
func TestEmitPathAllocs(t *testing.T) {
	nd := &node{name: "n"}
	if n := testing.AllocsPerRun(1000, func() { _ = failedIn(nd, nil) }); n != 0 {
		t.Errorf("failedIn(nil) allocates %v times", n)
	}
	tk := &task{}
	kc, vc := WindowedKeys(String(), Hopping(10*time.Second, 2*time.Second)), Int64()
	ka, va := appenderOf(kc), appenderOf(vc)
	w := Windowed[string]{Key: "zone-000042", Start: ms(8000), End: ms(18000)}
	var sink [][]byte
	n := testing.AllocsPerRun(1000, func() {
		kb, err := sinkEncode(tk, kc, carries(kc), ka, encoded{}, w)
		if err != nil {
			t.Fatal(err)
		}
		vb, err := sinkEncode(tk, vc, carries(vc), va, encoded{}, 5)
		if err != nil {
			t.Fatal(err)
		}
		sink = append(sink[:0], kb, vb)
	})
	if n >= 1 {
		t.Errorf("a windowed key and an Int64 value allocate %v times per record", n)
	}
}

package nexmark

import (
	"reflect"
	"strings"
	"testing"
)

// The fast path takes what Encode writes — every generated event, escapes
// included (URLs hold '&', written \u0026) — and decodes it as the general
// decoder does.
func TestDecodeFastTakesEncoded(t *testing.T) {
	g, err := NewGenerator(GeneratorConfig{Seed: 9, BaseTime: 1_700_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		b, err := Encode(nil, g.Next())
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := decodeFast(b)
		if !ok {
			t.Fatalf("event %d: the fast path refused %s", i, b)
		}
		slow, err := decodeGeneral(b)
		if err != nil || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("event %d: fast %+v, general %+v (%v)", i, fast, slow, err)
		}
	}
	special := Event{Type: PersonEvent, Person: &Person{ID: -1 << 63, Name: "a\"b\\c/<d>&\n\t\u2028é😀", State: "\x01", DateTime: 1<<63 - 1}}
	b, _ := Encode(nil, special)
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, special) {
		t.Fatalf("round trip of %s: %+v, %v", b, got.Person, err)
	}
}

// What the fast path does not take goes to the general decoder, which
// accepts or refuses it as before.
func TestDecodeFastLeavesTheRest(t *testing.T) {
	bid := `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}}`
	if _, ok := decodeFast([]byte(bid)); !ok {
		t.Fatalf("fast path refused %s", bid)
	}
	for _, tc := range []struct {
		in     string
		accept bool // by Decode (the general decoder)
	}{
		{strings.Replace(bid, `{"auction":1,`, `{ "auction":1,`, 1), true},              // whitespace
		{strings.Replace(bid, `"bidder":2,"price":3`, `"price":3,"bidder":2`, 1), true}, // key order
		{strings.Replace(bid, `"price":3`, `"price":3.5`, 1), false},                    // not an integer
		{strings.Replace(bid, `"price":3`, `"price":1e3`, 1), false},
		{strings.Replace(bid, `"price":3`, `"price":03`, 1), false},
		{strings.Replace(bid, `"price":3`, `"price":99999999999999999999`, 1), false},
		{strings.Replace(bid, `"extra":""`, `"extra":"","x":1`, 1), false},   // unknown field
		{strings.Replace(bid, `"event_type":2`, `"event_type":1`, 1), false}, // type and field disagree
		{bid + " ", true},
		{bid + "{}", false},
		{strings.Replace(bid, `"c"`, `"\ud83d\ude00"`, 1), true}, // a surrogate pair
		{strings.Replace(bid, `"c"`, "\"\xff\"", 1), true},       // invalid UTF-8, replaced
	} {
		if _, ok := decodeFast([]byte(tc.in)); ok {
			t.Errorf("fast path took %s", tc.in)
		}
		if _, err := Decode([]byte(tc.in)); (err == nil) != tc.accept {
			t.Errorf("Decode(%s): %v, want accepted %v", tc.in, err, tc.accept)
		}
	}
}

// Differential: whatever the fast path takes, the general decoder takes
// too and decodes to the same Event.
func FuzzDecodeFast(f *testing.F) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 2})
	for range 60 {
		b, _ := Encode(nil, g.Next())
		f.Add(b)
	}
	f.Add([]byte(`{"event_type":0,"person":{"id":-0,"name":"\u0026\n","emailAddress":"","creditCard":"","city":"","state":"","dateTime":-9223372036854775808,"extra":"\/"},"auction":null,"bid":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeFast(b)
		if !ok {
			return
		}
		slow, err := decodeGeneral(b)
		if err != nil {
			t.Fatalf("fast path took %q, the general decoder refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %+v, general %+v", b, fast, slow)
		}
	})
}

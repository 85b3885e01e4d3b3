package nexmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	g, err := NewGenerator(GeneratorConfig{Seed: 7, BaseTime: 1_700_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		e := g.Next()
		b, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", got, e)
		}
	}
}

func TestEncodeFormat(t *testing.T) {
	e := Event{Type: BidEvent, Bid: &Bid{Auction: 1000, Bidder: 1001, Price: 42, Channel: "Apple", URL: "u", DateTime: 1_700_000_000_123, Extra: ""}}
	b, err := Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1000,"bidder":1001,"price":42,"channel":"Apple","url":"u","dateTime":1700000000123,"extra":""}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	p := Event{Type: PersonEvent, Person: &Person{ID: 1000, Name: "n", EmailAddress: "e", CreditCard: "c", City: "Boise", State: "ID", DateTime: 5, Extra: "x"}}
	b, _ = Encode(nil, p)
	want = `{"event_type":0,"person":{"id":1000,"name":"n","emailAddress":"e","creditCard":"c","city":"Boise","state":"ID","dateTime":5,"extra":"x"},"auction":null,"bid":null}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	a := Event{Type: AuctionEvent, Auction: &Auction{ID: 1, ItemName: "i", Description: "d", InitialBid: 2, Reserve: 3, DateTime: 4, Expires: 5, Seller: 6, Category: 10, Extra: ""}}
	b, _ = Encode(nil, a)
	want = `{"event_type":1,"person":null,"auction":{"id":1,"itemName":"i","description":"d","initialBid":2,"reserve":3,"dateTime":4,"expires":5,"seller":6,"category":10,"extra":""},"bid":null}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if _, err := Encode(nil, Event{Type: BidEvent}); err == nil {
		t.Fatal("Encode of a bid event without a bid succeeded")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{``, "invalid JSON"},
		{`null`, "missing event_type"},
		{`{}`, "missing event_type"},
		{`[1]`, "invalid JSON"},
		{`{"event_type":3,"bid":{}}`, "unknown event_type 3"},
		{`{"event_type":-1}`, "unknown event_type -1"},
		{`{"event_type":2,"person":null,"auction":null,"bid":null}`, `"bid" is null`},
		{`{"event_type":0,"bid":{}}`, `"person" is null`},
		{`{"event_type":2,"person":{},"bid":{}}`, "2 of person/auction/bid are set"},
		{`{"event_type":2,"bid":{"price":1.5}}`, "invalid JSON"},
		{`{"event_type":2,"bid":{"price":"1"}}`, "invalid JSON"},
		{`{"event_type":2,"bid":{"prize":1}}`, "invalid JSON"},
		{`{"event_type":2,"bid":{},"other":1}`, "invalid JSON"},
		{`{"event_type":2,"bid":{}} {}`, "trailing data"},
		{`{"event_type":2,"bid":{}}x`, "trailing data"},
		{`{"event_type":1.0,"auction":{}}`, "invalid JSON"},
	} {
		_, err := Decode([]byte(tc.in))
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("Decode(%q) = %v, want a FormatError", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("Decode(%q) = %q, want it to mention %q", tc.in, err, tc.reason)
		}
	}
}

// decodeReference is the decoder Decode replaced, encoding/json's strict
// decoding into the Event structs: the specification Decode is held to.
func decodeReference(value []byte) (Event, error) {
	var raw struct {
		Type    *EventType `json:"event_type"`
		Person  *Person    `json:"person"`
		Auction *Auction   `json:"auction"`
		Bid     *Bid       `json:"bid"`
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Event{}, &FormatError{Reason: "invalid JSON", Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, &FormatError{Reason: "trailing data after the event object"}
	}
	if raw.Type == nil {
		return Event{}, &FormatError{Reason: "missing event_type"}
	}
	e := Event{Type: *raw.Type, Person: raw.Person, Auction: raw.Auction, Bid: raw.Bid}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// decodeCases are inputs on the edges of the rules Decode shares with
// encoding/json: the fuzz target's seeds, all checked by
// TestDecodeMatchesEncodingJSON.
var decodeCases = []string{
	``, ` `, `null`, ` null `, `nullx`, `null1`, `nul`, `{}`, `[1]`, `1`, `"x"`, `true`, `{}x`, `{} {}`, `{}}`,
	`{"event_type":2,"bid":{}}`,
	`{"event_type":2,"bid":{}} `,
	`{"event_type":2,"bid":{},}`,
	`{"event_type":2,,"bid":{}}`,
	`{"event_type":2 "bid":{}}`,
	`{"event_type":2,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":"e"}}`,
	`{"EVENT_TYPE":2,"BID":{"AUCTION":1,"Price":7}}`,
	`{"event_type":0,"person":{"id":1,"\u017ftate":"ID","name":"n"}}`,
	"{\"event_type\":0,\"person\":{\"id\":1,\"\u017ftate\":\"ID\",\"name\":\"n\"}}",
	`{"event_type":0,"person":{"\u0069d":1,"na\u006de":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"}}`,
	`{"event_type":0,"person":{"name":"\ud83d"}}`,
	`{"event_type":0,"person":{"name":"\ude00\ud83d"}}`,
	`{"event_type":0,"person":{"name":"\ud83dx\ude00\u0000"}}`,
	`{"event_type":0,"person":{"name":"\ud83d\u0041"}}`,
	`{"event_type":0,"person":{"name":"\ud83d\n"}}`,
	`{"event_type":0,"person":{"name":"\ud83d\u12"}}`,
	"{\"event_type\":0,\"person\":{\"name\":\"\xff\xc3\x28\xed\xa0\x80é\xef\xbf\xbd\"}}",
	"{\"event_type\":0,\"person\":{\"name\":\"a\x01\"}}",
	"{\"event_type\":0,\"person\":{\"name\":\"a\x7f\"}}",
	"{\"event_type\":0,\"person\":{\"n\xffame\":\"a\"}}",
	`{"event_type":0,"person":{"name":"\x"}}`,
	`{"event_type":0,"person":{"name":"\'"}}`,
	`{"event_type":0,"person":{"name":"\u12"}}`,
	`{"event_type":0,"person":{"name":"\u12G4"}}`,
	`{"event_type":0,"person":{"name":"abc`,
	`{"event_type":0,"person":{"name":"abc\`,
	`{"event_type":0,"person":{"name":null,"id":null,"extra":"x"}}`,
	`{"event_type":2,"bid":{"price":5,"price":null}}`,
	`{"event_type":2,"bid":{"price":1},"bid":{"auction":2}}`,
	`{"event_type":2,"bid":{"price":1},"bid":null}`,
	`{"event_type":2,"bid":null,"bid":{"price":1}}`,
	`{"event_type":2,"event_type":null,"bid":{}}`,
	`{"event_type":null,"event_type":2,"bid":{}}`,
	`{"event_type":0,"bid":{"price":1},"event_type":2}`,
	`{"event_type":0,"bid":{"price":1},"event_type":2,"bid":{"auction":3}}`,
	`{"event_type":0,"bid":{"price":1},"bid":null,"event_type":2,"bid":{"auction":3}}`,
	`{"bid":{"price":1},"event_type":2}`,
	`{"event_type":1,"person":{"id":1},"person":null,"auction":{"id":2}}`,
	`{"event_type":2,"bid":{"price":-0}}`,
	`{"event_type":2,"bid":{"price":-}}`,
	`{"event_type":2,"bid":{"price":01}}`,
	`{"event_type":2,"bid":{"price":1.0}}`,
	`{"event_type":2,"bid":{"price":1.}}`,
	`{"event_type":2,"bid":{"price":1e2}}`,
	`{"event_type":2,"bid":{"price":1E2}}`,
	`{"event_type":2,"bid":{"price":9223372036854775807}}`,
	`{"event_type":2,"bid":{"price":9223372036854775808}}`,
	`{"event_type":2,"bid":{"price":-9223372036854775808}}`,
	`{"event_type":2,"bid":{"price":-9223372036854775809}}`,
	`{"event_type":2,"bid":{"price":99999999999999999999999}}`,
	`{"event_type":2,"bid":{"price":"1"}}`,
	`{"event_type":2,"bid":{"price":true}}`,
	`{"event_type":2,"bid":{"channel":1}}`,
	`{"event_type":2,"bid":{"channel":["a"]}}`,
	`{"event_type":2,"bid":{"channel":{}}}`,
	`{"event_type":2,"bid":[]}`,
	`{"event_type":2,"bid":true}`,
	`{"event_type":2,"bid":"x"}`,
	`{"event_type":"2","bid":{}}`,
	`{"event_type":9223372036854775807,"bid":{}}`,
	`{"event_type":2,"bid":{"url":"x"} , "person" : null ,"auction":null}`,
	"\t{\n\"event_type\"\r:\t2 ,\"bid\":\n{ } }\n",
	`{"event_type":2,"bid":{"extra":"` + strings.Repeat(`\u00e9`, 40) + `"}}`,
	`{"event_type":2,"bid":{"unknown":{"deep":[1,2,{"x":null}]}}}`,
	`{"event_type":2,"bid":{},"other":[}`,
	`{"event_type":2,"bid":{}`,
	`{"event_type":2,"bid":{},"x":1 x`,
	`{"event_type":2,"bid":{}}` + "\x00",
	"{\"event_type\x00\":2}",
	`{"event\u005ftype":1,"auction":{"id":1}}`,
	`{"event_type":1,"auction":{"ID":1,"itemname":"i","DESCRIPTION":"d","initialbid":1,"reserve":2,"datetime":3,"expires":4,"seller":5,"category":6,"extra":""}}`,
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 3})
	cases := slices.Clone(decodeCases)
	for range 50 {
		b, _ := Encode(nil, g.Next())
		cases = append(cases, string(b))
	}
	for _, in := range cases {
		checkDecode(t, []byte(in))
	}
}

// Decode takes any layout of the format, not only Encode's: whitespace,
// key order; and refuses what the format excludes (cases from wt/nexq's
// tests of the fast path this decoder replaced).
func TestDecodeLayouts(t *testing.T) {
	bid := `{"event_type":2,"person":null,"auction":null,"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}}`
	for _, tc := range []struct {
		in     string
		accept bool
	}{
		{bid, true},
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
		if _, err := Decode([]byte(tc.in)); (err == nil) != tc.accept {
			t.Errorf("Decode(%s): %v, want accepted %v", tc.in, err, tc.accept)
		}
		checkDecode(t, []byte(tc.in))
	}
	special := Event{Type: PersonEvent, Person: &Person{ID: -1 << 63, Name: "a\"b\\c/<d>&\n\t\u2028é😀", State: "\x01", DateTime: 1<<63 - 1}}
	b, _ := Encode(nil, special)
	if got, err := Decode(b); err != nil || !reflect.DeepEqual(got, special) {
		t.Fatalf("round trip of %s: %+v, %v", b, got.Person, err)
	}
}

// checkDecode fails t unless Decode and the kind-selecting decoders agree
// with decodeReference on in: the same event, or a FormatError with the
// same reason.
func checkDecode(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := decodeReference(in)
	for _, k := range []kinds{allKinds, kindsOf(BidEvent), kindsOf(PersonEvent, AuctionEvent), 0,
		kindsOf(BidEvent) | numbersOnly, allKinds | numbersOnly} {
		got, err := decodeEvent(in, k, false)
		if k == allKinds {
			got, err = Decode(in)
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("kinds %03b, input %q: got error %v, encoding/json %v", k, in, err, wantErr)
		}
		if err != nil {
			var fe, wfe *FormatError
			if !errors.As(err, &fe) || !errors.As(wantErr, &wfe) {
				t.Fatalf("input %q: errors %v, %v: want FormatErrors", in, err, wantErr)
			}
			if fe.Reason != wfe.Reason {
				t.Fatalf("kinds %03b, input %q: got reason %q (%v), encoding/json %q (%v)", k, in, fe.Reason, err, wfe.Reason, wantErr)
			}
			continue
		}
		w := want
		if !k.has(want.Type) {
			w = Event{Type: want.Type}
		}
		if k&numbersOnly != 0 {
			w = withoutStrings(w)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("kinds %03b, input %q:\n got %s\nwant %s", k, in, show(got), show(w))
		}
	}
}

// withoutStrings is e with every string field of its body empty.
func withoutStrings(e Event) Event {
	if p := e.Person; p != nil {
		e.Person = &Person{ID: p.ID, DateTime: p.DateTime}
	}
	if a := e.Auction; a != nil {
		e.Auction = &Auction{ID: a.ID, InitialBid: a.InitialBid, Reserve: a.Reserve, DateTime: a.DateTime,
			Expires: a.Expires, Seller: a.Seller, Category: a.Category}
	}
	if b := e.Bid; b != nil {
		e.Bid = &Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime}
	}
	return e
}

func show(e Event) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// FuzzDecodeMatchesEncodingJSON holds Decode (and the decoders keeping
// only some kinds) to encoding/json's strict decoding on arbitrary input.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 1})
	for range 6 {
		b, _ := Encode(nil, g.Next())
		f.Add(b)
	}
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkDecode)
}

func FuzzDecode(f *testing.F) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 1})
	for range 4 {
		b, _ := Encode(nil, g.Next())
		f.Add(b)
	}
	f.Add([]byte(`{"event_type":2,"bid":{"auction":1}}`))
	f.Add([]byte(`{"event_type":0,"person":null}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := Decode(in)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FormatError: %v", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid event: %v", err)
		}
		b, err := Encode(nil, e)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		e2, err := Decode(b)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-encoded event does not decode to itself: %v", err)
		}
	})
}

// BenchmarkDecode compares Decode with encoding/json's strict decoding
// (the reference) and with decoding that keeps the bids only, over the
// generator's mix of events.
func BenchmarkDecode(b *testing.B) {
	g, _ := NewGenerator(GeneratorConfig{Seed: 1})
	var values [][]byte
	for range 1000 {
		v, _ := Encode(nil, g.Next())
		values = append(values, v)
	}
	for _, bc := range []struct {
		name   string
		decode func([]byte) (Event, error)
	}{
		{"reference", decodeReference},
		{"all", Decode},
		{"bids", func(v []byte) (Event, error) { return decodeEvent(v, kindsOf(BidEvent), false) }},
		{"persons+auctions", func(v []byte) (Event, error) { return decodeEvent(v, kindsOf(PersonEvent, AuctionEvent), false) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := bc.decode(values[i%len(values)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

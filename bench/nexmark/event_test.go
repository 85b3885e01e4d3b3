package nexmark

import (
	"errors"
	"reflect"
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

package nexmark

import (
	"reflect"
	"testing"
)

// The binary codecs of the closing processor round-trip every value and
// refuse, with an error and no panic, bytes they did not write.
func TestClosingCodecsRoundTrip(t *testing.T) {
	a := &openAuction{ID: 1000, Seller: -7, Category: 12, DateTime: 1_700_000_000_000, Expires: 1_700_000_000_999, Reserve: 1 << 40}
	for _, l := range []lot{{Auction: a}, {Bid: offer{Price: 5, DateTime: -1, Bidder: 1 << 62}}} {
		b, err := lotCodec{}.Encode(l)
		if err != nil {
			t.Fatal(err)
		}
		got, err := lotCodec{}.Decode(b)
		if err != nil || !reflect.DeepEqual(got, l) {
			t.Errorf("lot %+v: decoded %+v, %v", l, got, err)
		}
	}
	for _, oa := range []openAuction{*a, {ID: 1, Expires: 2, HasBest: true, Best: offer{Price: 3, DateTime: 1, Bidder: 9}}} {
		b, err := openAuctionCodec{}.Encode(oa)
		if err != nil {
			t.Fatal(err)
		}
		got, err := openAuctionCodec{}.Decode(b)
		if err != nil || got != oa {
			t.Errorf("open auction %+v: decoded %+v, %v", oa, got, err)
		}
	}
	for _, os := range [][]offer{nil, {{Price: 1, DateTime: -2, Bidder: 3}, {Price: 1 << 62}}} {
		b, _ := offersCodec{}.Encode(os)
		got, err := offersCodec{}.Decode(b)
		if err != nil || len(got) != len(os) || (len(os) > 0 && !reflect.DeepEqual(got, os)) {
			t.Errorf("offers %+v: decoded %+v, %v", os, got, err)
		}
	}
	if _, err := (offersCodec{}).Decode(make([]byte, 25)); err == nil {
		t.Error("offers of 25 bytes: no error")
	}
	for _, bad := range [][]byte{nil, {'a'}, {'b', 1, 2}, make([]byte, 25), make([]byte, 49)} {
		if _, err := (lotCodec{}).Decode(bad); err == nil {
			t.Errorf("lot %v: no error", bad)
		}
	}
	withBest := make([]byte, 56)
	withBest[55] = 1           // says it has a best bid, but is 7 fields long
	noBest := make([]byte, 80) // 10 fields long, but says it has no best bid
	for _, bad := range [][]byte{nil, make([]byte, 55), make([]byte, 64), withBest, noBest} {
		if _, err := (openAuctionCodec{}).Decode(bad); err == nil {
			t.Errorf("open auction of %d bytes: no error", len(bad))
		}
	}
}

func FuzzClosingCodecs(f *testing.F) {
	for _, l := range []lot{{Auction: &openAuction{ID: 1, Expires: 5}}, {Bid: offer{Price: 3}}} {
		b, _ := lotCodec{}.Encode(l)
		f.Add(b)
	}
	b, _ := openAuctionCodec{}.Encode(openAuction{HasBest: true, Best: offer{Price: 1}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := (lotCodec{}).Decode(b); err == nil {
			re, _ := lotCodec{}.Encode(l)
			if string(re) != string(b) {
				t.Fatalf("lot %x decoded and re-encoded as %x", b, re)
			}
		}
		if os, err := (offersCodec{}).Decode(b); err == nil {
			if re, _ := (offersCodec{}).Encode(os); string(re) != string(b) {
				t.Fatalf("offers %x decoded and re-encoded as %x", b, re)
			}
		}
		if oa, err := (openAuctionCodec{}).Decode(b); err == nil {
			if re, _ := (openAuctionCodec{}).Encode(oa); string(re) != string(b) {
				t.Fatalf("open auction %x decoded and re-encoded as %x", b, re)
			}
		}
	})
}

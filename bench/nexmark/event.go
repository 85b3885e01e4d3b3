// Package nexmark is the Nexmark benchmark's data model, its event
// generator and an independent batch computation of the Nexmark queries.
//
// Nexmark models an online auction: persons join, open auctions and bid on
// them. One input topic carries all three kinds of event; this package fixes
// the topic's value format so that any producer can feed the queries:
//
//	{"event_type":0,"person":{...},"auction":null,"bid":null}
//	{"event_type":1,"person":null,"auction":{...},"bid":null}
//	{"event_type":2,"person":null,"auction":null,"bid":{...}}
//
// with Nexmark's field names (see Person, Auction and Bid). dateTime and
// expires are Unix milliseconds; every number is a JSON integer. The Kafka
// record timestamp of an event equals its dateTime and the record key is
// empty.
//
// The queries themselves are stream programs (package stream), one file
// per query — q0.go, q1.go, ... — each short and written to be read as an
// example of the stream API; Build declares one by name on a Builder (the
// runner examples/nexmark and `weir bench nexmark --query` both use it).
//
// The batch computations (Q0 ... Q11 in queries.go) use plain sorting and
// grouping, independent of the stream library: they are the reference the
// stream queries are tested against (Check compares a bounded run's output
// with them).
package nexmark

import (
	"encoding/json"
	"fmt"
)

// EventType tells which of an Event's fields is set. The values are part
// of the event format and must not change.
type EventType int

const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Person is a user who joined the auction site.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"` // Unix ms
	Extra        string `json:"extra"`
}

// Auction is an item put up for sale by Seller (a Person ID), open from
// DateTime until Expires.
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"` // Unix ms
	Expires     int64  `json:"expires"`  // Unix ms
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is an offer of Price by Bidder (a Person ID) on Auction (an Auction
// ID).
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"` // Unix ms
	Extra    string `json:"extra"`
}

// Event is one Nexmark event: exactly one of Person, Auction and Bid is
// set, the one Type names.
type Event struct {
	Type    EventType `json:"event_type"`
	Person  *Person   `json:"person"`
	Auction *Auction  `json:"auction"`
	Bid     *Bid      `json:"bid"`
}

// DateTime is the event time of e in Unix milliseconds (0 for an invalid
// Event).
func (e Event) DateTime() int64 {
	switch {
	case e.Type == PersonEvent && e.Person != nil:
		return e.Person.DateTime
	case e.Type == AuctionEvent && e.Auction != nil:
		return e.Auction.DateTime
	case e.Type == BidEvent && e.Bid != nil:
		return e.Bid.DateTime
	}
	return 0
}

// Validate reports whether e is well formed: a known Type with exactly
// that one field set.
func (e Event) Validate() error {
	set := 0
	for _, p := range []bool{e.Person != nil, e.Auction != nil, e.Bid != nil} {
		if p {
			set++
		}
	}
	var want bool
	switch e.Type {
	case PersonEvent:
		want = e.Person != nil
	case AuctionEvent:
		want = e.Auction != nil
	case BidEvent:
		want = e.Bid != nil
	default:
		return &FormatError{Reason: fmt.Sprintf("unknown event_type %d (want 0 person, 1 auction, 2 bid)", int(e.Type))}
	}
	if !want {
		return &FormatError{Reason: fmt.Sprintf("event_type %d (%s) but %q is null", int(e.Type), e.Type, e.Type.String())}
	}
	if set != 1 {
		return &FormatError{Reason: fmt.Sprintf("event_type %d (%s) but %d of person/auction/bid are set (want exactly one)", int(e.Type), e.Type, set)}
	}
	return nil
}

// FormatError is returned by Decode for a value that is not a Nexmark
// event. Test for it with errors.As.
type FormatError struct {
	Reason string
	Err    error // the underlying JSON error, if any
}

func (e *FormatError) Error() string {
	if e.Err != nil {
		return "nexmark event: " + e.Reason + ": " + e.Err.Error()
	}
	return "nexmark event: " + e.Reason
}

func (e *FormatError) Unwrap() error { return e.Err }

// Encode appends the JSON form of e to dst. It fails only for an invalid
// Event.
func Encode(dst []byte, e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// Decode parses one event value. Unknown fields, non-integer numbers,
// trailing data, a missing or unknown event_type and an event whose set
// field does not match its event_type are FormatErrors. It accepts and
// rejects exactly what encoding/json's Decoder with DisallowUnknownFields
// does for the Event structs (keys matched case-insensitively too, a
// repeated key's later value winning), without its reflection (see
// eventjson.go).
func Decode(value []byte) (Event, error) { return decodeEvent(value, allKinds, false) }

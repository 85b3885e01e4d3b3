package nexmark

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the event decoder: a scanner for the one JSON shape of the
// event format, without reflection. It is held to the rules of the decoder
// it replaced — encoding/json's Decoder with DisallowUnknownFields into the
// Event structs, then a check for trailing data — so that exactly the same
// values are accepted, decoded to the same Event, and rejected with the
// same FormatError reason (FuzzDecodeMatchesEncodingJSON compares the two on
// arbitrary input). Those rules, beyond plain JSON syntax:
//
//   - a key matches a field by its exact name, else case-insensitively
//     (Unicode simple folding, as bytes.EqualFold); any other key is an
//     error, its value unread;
//   - a key may repeat: a later value overwrites an earlier one, except
//     that a second object for person, auction or bid is merged into the
//     first, and null leaves a number or string field as it was (it sets
//     event_type and the three objects to absent);
//   - a number field takes only an integer within int64 (1.0, 1e3 are
//     errors); strings are unescaped with invalid UTF-8 and unpaired
//     surrogates turned into U+FFFD;
//   - the value must be an object or null; after it only whitespace may
//     follow ("trailing data", checked after the value decoded).

// kinds is a set of event types: the ones a decoder keeps the body of.
type kinds uint8

const allKinds kinds = 1<<PersonEvent | 1<<AuctionEvent | 1<<BidEvent

func kindsOf(ts ...EventType) kinds {
	var k kinds
	for _, t := range ts {
		k |= 1 << t
	}
	return k
}

func (k kinds) has(t EventType) bool { return t >= 0 && t <= BidEvent && k&(1<<t) != 0 }

// numbersOnly, added to a set of kinds, keeps only the number fields of the
// bodies kept: their strings are checked as strictly but left empty (not
// unescaped, not allocated), for a query that reads none of them.
const numbersOnly kinds = 1 << 7

// presentPerson, presentAuction and presentBid stand for a body that was
// set but not kept, in the Event given to Validate (which looks only at
// which bodies are set); they never leave decodeEvent.
var (
	presentPerson  = new(Person)
	presentAuction = new(Auction)
	presentBid     = new(Bid)
)

// decodeEvent parses one event value as Decode does (same results, same
// errors) and keeps the body of an event only if its type is in want: an
// event of another type, checked as strictly, comes back with only Type
// set. force keeps every body met, whatever the type seen so far.
func decodeEvent(b []byte, want kinds, force bool) (Event, error) {
	d := decoder{b: b, numbersOnly: want&numbersOnly != 0}
	var (
		typ     int64
		hasType bool
		person  *Person
		auction *Auction
		bid     *Bid
		set     [3]bool // the body is non-null
		skipped [3]bool // a part of the body was validated but not kept
	)
	// keep tells whether to build the body of kind k now: it is wanted and
	// could be the event's (the type is unknown yet or is k).
	keep := func(k EventType) bool {
		return want.has(k) && (force || !hasType || EventType(typ) == k)
	}
	switch d.peek() {
	case 'n':
		if !d.null() {
			return Event{}, d.invalid("invalid literal")
		}
	case '{':
		d.i++
		for first := true; ; first = false {
			key, more, err := d.key(first)
			if err != nil {
				return Event{}, err
			}
			if !more {
				break
			}
			f := topField(key)
			if f < 0 {
				return Event{}, d.invalid("unknown field " + strconv.Quote(string(key)))
			}
			if f == fieldEventType {
				null, err := d.int(&typ)
				if err != nil {
					return Event{}, err
				}
				hasType = !null
				if hasType && int64(int(typ)) != typ {
					return Event{}, d.invalid("event_type out of range")
				}
				continue
			}
			k := EventType(f)
			if d.peek() == 'n' {
				if !d.null() {
					return Event{}, d.invalid("invalid literal")
				}
				set[k], skipped[k] = false, false
				switch k {
				case PersonEvent:
					person = nil
				case AuctionEvent:
					auction = nil
				case BidEvent:
					bid = nil
				}
				continue
			}
			kept := keep(k)
			switch k {
			case PersonEvent:
				if kept && person == nil {
					person = new(Person)
				}
				err = d.person(person, kept)
			case AuctionEvent:
				if kept && auction == nil {
					auction = new(Auction)
				}
				err = d.auction(auction, kept)
			case BidEvent:
				if kept && bid == nil {
					bid = new(Bid)
				}
				err = d.bid(bid, kept)
			}
			if err != nil {
				return Event{}, err
			}
			set[k], skipped[k] = true, skipped[k] || !kept
		}
	default:
		return Event{}, d.invalid("want an object")
	}
	d.ws()
	if d.i != len(d.b) {
		return Event{}, &FormatError{Reason: "trailing data after the event object"}
	}
	if !hasType {
		return Event{}, &FormatError{Reason: "missing event_type"}
	}
	e := Event{Type: EventType(typ)}
	if set[PersonEvent] {
		e.Person = presentPerson
	}
	if set[AuctionEvent] {
		e.Auction = presentAuction
	}
	if set[BidEvent] {
		e.Bid = presentBid
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	if !want.has(e.Type) {
		return Event{Type: e.Type}, nil
	}
	if skipped[e.Type] {
		// A misleading event_type earlier in the object made this body
		// be skipped in part: decode again keeping every body.
		return decodeEvent(b, want, true)
	}
	switch e.Type {
	case PersonEvent:
		return Event{Type: e.Type, Person: person}, nil
	case AuctionEvent:
		return Event{Type: e.Type, Auction: auction}, nil
	}
	return Event{Type: e.Type, Bid: bid}, nil
}

// decoder reads one JSON value from b, from offset i.
type decoder struct {
	b []byte
	i int
	// numbersOnly: str keeps no string (see the kinds numbersOnly).
	numbersOnly bool
}

// invalid is the error of a value that is not valid JSON for an event.
func (d *decoder) invalid(msg string) error {
	return &FormatError{Reason: "invalid JSON", Err: &SyntaxError{Offset: d.i, Msg: msg}}
}

// SyntaxError is the underlying error of a FormatError "invalid JSON": what
// is wrong, at which byte offset of the value.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg + " at offset " + strconv.Itoa(e.Offset) }

// ws skips whitespace.
func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end (a 0 byte
// is never valid where peek is used, so the two need not be told apart).
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null consumes the literal null at d.i.
func (d *decoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// key moves to the next member of the object being read, whose '{' is
// consumed: it consumes the ',' before the member (unless first), its key
// and the ':' after it, leaving d.i at the value. more is false at the
// closing '}', which it consumes. The key may alias d.b.
func (d *decoder) key(first bool) (key []byte, more bool, err error) {
	c := d.peek()
	switch {
	case c == '}':
		d.i++
		return nil, false, nil
	case !first && c == ',':
		d.i++
		c = d.peek()
	case !first:
		return nil, false, d.invalid("want ',' or '}' after an object member")
	}
	if c != '"' {
		return nil, false, d.invalid("want a string key")
	}
	start, j := d.i+1, d.i+1
	for ; j < len(d.b); j++ {
		if c := d.b[j]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	if j < len(d.b) && d.b[j] == '"' {
		key, d.i = d.b[start:j], j+1
	} else {
		k, err := d.unquote(true)
		if err != nil {
			return nil, false, err
		}
		key = []byte(k)
	}
	if d.peek() != ':' {
		return nil, false, d.invalid("want ':' after an object key")
	}
	d.i++
	d.ws()
	return key, true, nil
}

// str reads a string or null value into *dst (null leaves it as it is).
// Unless keep, it only checks the value.
func (d *decoder) str(dst *string, keep bool) error {
	keep = keep && !d.numbersOnly
	switch d.peek() {
	case 'n':
		if !d.null() {
			return d.invalid("invalid literal")
		}
		return nil
	case '"':
	default:
		return d.invalid("want a string")
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		if c == '"' {
			if keep {
				*dst = string(d.b[start:j])
			}
			d.i = j + 1
			return nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			u, err := d.unquote(keep)
			if err == nil && keep {
				*dst = u
			}
			return err
		}
	}
	return d.invalid("unterminated string")
}

// unquote reads the string at d.i (its opening quote) and returns it
// unescaped, as encoding/json does: escapes decoded, a \u surrogate pair
// joined, an unpaired surrogate and each byte of invalid UTF-8 turned into
// U+FFFD. Control characters and unknown escapes are errors. Unless keep,
// it only checks the string and returns "".
func (d *decoder) unquote(keep bool) (string, error) {
	if !keep {
		return "", d.skipString()
	}
	var buf [128]byte
	out := buf[:0]
	i := d.i + 1
	for i < len(d.b) {
		c := d.b[i]
		switch {
		case c == '"':
			d.i = i + 1
			if !keep {
				return "", nil
			}
			return string(out), nil
		case c < 0x20:
			d.i = i
			return "", d.invalid("control character in string")
		case c == '\\':
			if i+1 >= len(d.b) {
				d.i = i
				return "", d.invalid("unterminated string")
			}
			switch e := d.b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(d.b[i+2:])
				if r < 0 {
					d.i = i
					return "", d.invalid("invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// The pair's second half, if it is one, is consumed
					// with the first; otherwise it is read on its own.
					if i+1 < len(d.b) && d.b[i] == '\\' && d.b[i+1] == 'u' {
						if r2 := hex4(d.b[i+2:]); r2 >= 0 {
							if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
								out = utf8.AppendRune(out, p)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				d.i = i
				return "", d.invalid("invalid escape in string")
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(d.b[i:])
			out = utf8.AppendRune(out, r)
			i += n
		}
	}
	d.i = i
	return "", d.invalid("unterminated string")
}

// skipString is unquote's checks without its result: a string value's
// only errors are control characters, unknown escapes and a missing end
// (invalid UTF-8 and lone surrogates are replaced, never rejected).
func (d *decoder) skipString() error {
	for i := d.i + 1; i < len(d.b); {
		switch c := d.b[i]; {
		case c == '"':
			d.i = i + 1
			return nil
		case c < 0x20:
			d.i = i
			return d.invalid("control character in string")
		case c != '\\':
			i++
		case i+1 >= len(d.b):
			d.i = i
			return d.invalid("unterminated string")
		default:
			switch d.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(d.b[i+2:]) < 0 {
					d.i = i
					return d.invalid("invalid \\u escape")
				}
				i += 6
			default:
				d.i = i
				return d.invalid("invalid escape in string")
			}
		}
	}
	d.i = len(d.b)
	return d.invalid("unterminated string")
}

// hex4 is the value of the 4 hex digits b starts with, -1 if it does not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// int reads an integer or null value into *dst (null leaves it as it is
// and returns null true). A number with a fraction or an exponent, or
// outside int64, is an error.
func (d *decoder) int(dst *int64) (null bool, err error) {
	c := d.peek()
	if c == 'n' {
		if !d.null() {
			return false, d.invalid("invalid literal")
		}
		return true, nil
	}
	i, neg := d.i, false
	if c == '-' {
		neg = true
		i++
	}
	start := i
	var u uint64
	for ; i < len(d.b) && '0' <= d.b[i] && d.b[i] <= '9'; i++ {
		if u > (1<<63)/10 {
			d.i = i
			return false, d.invalid("number out of int64 range")
		}
		u = u*10 + uint64(d.b[i]-'0')
	}
	switch {
	case i == start:
		return false, d.invalid("want an integer")
	case d.b[start] == '0' && i-start > 1:
		return false, d.invalid("leading zero in a number")
	case i < len(d.b) && (d.b[i] == '.' || d.b[i] == 'e' || d.b[i] == 'E'):
		d.i = i
		return false, d.invalid("want an integer, not a fraction or exponent")
	case u > 1<<63 || (u == 1<<63 && !neg):
		return false, d.invalid("number out of int64 range")
	}
	d.i = i
	if neg {
		*dst = -int64(u)
	} else {
		*dst = int64(u)
	}
	return false, nil
}

// num is int for a field that keeps no record of null.
func (d *decoder) num(dst *int64) error {
	_, err := d.int(dst)
	return err
}

// object starts reading an object value: it consumes its '{'.
func (d *decoder) object() error {
	if d.peek() != '{' {
		return d.invalid("want an object")
	}
	d.i++
	return nil
}

// person reads a person object into *p; unless keep (then p may be nil)
// it only checks it.
func (d *decoder) person(p *Person, keep bool) error {
	if !keep {
		p = new(Person) // does not escape: only its numbers are written
	}
	if err := d.object(); err != nil {
		return err
	}
	for first := true; ; first = false {
		key, more, err := d.key(first)
		if err != nil || !more {
			return err
		}
		switch match(key, personFields[:]) {
		case 0:
			err = d.num(&p.ID)
		case 1:
			err = d.str(&p.Name, keep)
		case 2:
			err = d.str(&p.EmailAddress, keep)
		case 3:
			err = d.str(&p.CreditCard, keep)
		case 4:
			err = d.str(&p.City, keep)
		case 5:
			err = d.str(&p.State, keep)
		case 6:
			err = d.num(&p.DateTime)
		case 7:
			err = d.str(&p.Extra, keep)
		default:
			return d.invalid("unknown person field " + strconv.Quote(string(key)))
		}
		if err != nil {
			return err
		}
	}
}

// auction reads an auction object into *a, as person does.
func (d *decoder) auction(a *Auction, keep bool) error {
	if !keep {
		a = new(Auction)
	}
	if err := d.object(); err != nil {
		return err
	}
	for first := true; ; first = false {
		key, more, err := d.key(first)
		if err != nil || !more {
			return err
		}
		switch match(key, auctionFields[:]) {
		case 0:
			err = d.num(&a.ID)
		case 1:
			err = d.str(&a.ItemName, keep)
		case 2:
			err = d.str(&a.Description, keep)
		case 3:
			err = d.num(&a.InitialBid)
		case 4:
			err = d.num(&a.Reserve)
		case 5:
			err = d.num(&a.DateTime)
		case 6:
			err = d.num(&a.Expires)
		case 7:
			err = d.num(&a.Seller)
		case 8:
			err = d.num(&a.Category)
		case 9:
			err = d.str(&a.Extra, keep)
		default:
			return d.invalid("unknown auction field " + strconv.Quote(string(key)))
		}
		if err != nil {
			return err
		}
	}
}

// bid reads a bid object into *b, as person does.
func (d *decoder) bid(b *Bid, keep bool) error {
	if !keep {
		b = new(Bid)
	}
	if err := d.object(); err != nil {
		return err
	}
	for first := true; ; first = false {
		key, more, err := d.key(first)
		if err != nil || !more {
			return err
		}
		switch match(key, bidFields[:]) {
		case 0:
			err = d.num(&b.Auction)
		case 1:
			err = d.num(&b.Bidder)
		case 2:
			err = d.num(&b.Price)
		case 3:
			err = d.str(&b.Channel, keep)
		case 4:
			err = d.str(&b.URL, keep)
		case 5:
			err = d.num(&b.DateTime)
		case 6:
			err = d.str(&b.Extra, keep)
		default:
			return d.invalid("unknown bid field " + strconv.Quote(string(key)))
		}
		if err != nil {
			return err
		}
	}
}

// The JSON names of the fields, in the order of the decoders' cases. The
// top level's are indexed by EventType, event_type last.
var (
	topFields     = [...]string{"person", "auction", "bid", "event_type"}
	personFields  = [...]string{"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"}
	auctionFields = [...]string{"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"}
	bidFields     = [...]string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra"}
)

const fieldEventType = 3

func topField(key []byte) int { return match(key, topFields[:]) }

// match is the index of the field named key: by exact name, else the
// first equal under case folding (the names of one struct are distinct
// under folding); -1 if none.
func match(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(string(key), n) {
			return i
		}
	}
	return -1
}

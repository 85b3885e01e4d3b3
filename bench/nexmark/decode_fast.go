package nexmark

import (
	"bytes"
	"unicode/utf8"
)

// decodeFast parses value when it is laid out exactly as Encode writes it:
// the keys of Event, Person, Auction and Bid in their declared order, no
// whitespace, integers without sign oddities, strings of ASCII with the
// escapes encoding/json writes. It reports ok false for anything else,
// which Decode then hands to the general (encoding/json) decoder, so the
// fast path only has to be right on what it accepts: there it yields the
// Event the general decoder yields (FuzzDecodeFast checks both on the same
// inputs), and it never accepts what the general decoder refuses.
func decodeFast(value []byte) (e Event, ok bool) {
	p := fastParser{b: value}
	if !p.lit(`{"event_type":`) {
		return Event{}, false
	}
	t, ok := p.int()
	if !ok || t < 0 || t > 2 {
		return Event{}, false
	}
	e.Type = EventType(t)
	if !p.lit(`,"person":`) {
		return Event{}, false
	}
	if !p.lit("null") {
		if e.Person, ok = p.person(); !ok {
			return Event{}, false
		}
	}
	if !p.lit(`,"auction":`) {
		return Event{}, false
	}
	if !p.lit("null") {
		if e.Auction, ok = p.auction(); !ok {
			return Event{}, false
		}
	}
	if !p.lit(`,"bid":`) {
		return Event{}, false
	}
	if !p.lit("null") {
		if e.Bid, ok = p.bid(); !ok {
			return Event{}, false
		}
	}
	if !p.lit("}") || len(p.b) != 0 || e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// fastParser consumes b from the front; every method reports false,
// consuming an unspecified part, when the input is not what it expects.
type fastParser struct{ b []byte }

func (p *fastParser) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// key consumes `,"name":` (or `"name":` first in an object).
func (p *fastParser) key(name string, first bool) bool {
	if !first && !p.lit(",") {
		return false
	}
	return p.lit(`"`) && p.lit(name) && p.lit(`":`)
}

// int consumes a JSON integer that fits an int64: an optional minus, then
// 0 or a digit 1-9 followed by digits. A fraction or an exponent (which
// encoding/json would refuse for an int64) is left unconsumed, and the
// caller's next literal fails.
func (p *fastParser) int() (int64, bool) {
	b := p.b
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '0' || b[0] > '9' || (b[0] == '0' && len(b) > 1 && b[1] >= '0' && b[1] <= '9') {
		return 0, false
	}
	var u uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 19 { // 20 digits or more: outside int64
			return 0, false
		}
		u = u*10 + uint64(b[i]-'0')
	}
	if (!neg && u > 1<<63-1) || (neg && u > 1<<63) {
		return 0, false
	}
	p.b = b[i:]
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// str consumes a JSON string of ASCII characters; escapes are those
// encoding/json writes (\" \\ \/ \b \f \n \r \t and \u for a non-surrogate
// code point). Other bytes >= 0x80 (whose invalid UTF-8 encoding/json
// would replace) are left to the general decoder.
func (p *fastParser) str() (string, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return "", false
	}
	b := p.b[1:]
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return "", false
	}
	if bytes.IndexByte(b[:end], '\\') < 0 {
		for _, c := range b[:end] {
			if c < 0x20 || c >= 0x80 {
				return "", false
			}
		}
		p.b = b[end+1:]
		return string(b[:end]), true
	}
	var out []byte
	for i := 0; ; {
		if i >= len(b) {
			return "", false
		}
		c := b[i]
		switch {
		case c == '"':
			p.b = b[i+1:]
			return string(out), true
		case c < 0x20 || c >= 0x80:
			return "", false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return "", false
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
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
			if i+6 > len(b) {
				return "", false
			}
			var r rune
			for _, h := range b[i+2 : i+6] {
				switch {
				case h >= '0' && h <= '9':
					r = r<<4 | rune(h-'0')
				case h >= 'a' && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case h >= 'A' && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if r >= 0xD800 && r < 0xE000 { // a surrogate: the general decoder pairs them
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
}

func (p *fastParser) person() (*Person, bool) {
	var v Person
	ok := p.lit("{") &&
		p.key("id", true) && p.intTo(&v.ID) &&
		p.key("name", false) && p.strTo(&v.Name) &&
		p.key("emailAddress", false) && p.strTo(&v.EmailAddress) &&
		p.key("creditCard", false) && p.strTo(&v.CreditCard) &&
		p.key("city", false) && p.strTo(&v.City) &&
		p.key("state", false) && p.strTo(&v.State) &&
		p.key("dateTime", false) && p.intTo(&v.DateTime) &&
		p.key("extra", false) && p.strTo(&v.Extra) &&
		p.lit("}")
	return &v, ok
}

func (p *fastParser) auction() (*Auction, bool) {
	var v Auction
	ok := p.lit("{") &&
		p.key("id", true) && p.intTo(&v.ID) &&
		p.key("itemName", false) && p.strTo(&v.ItemName) &&
		p.key("description", false) && p.strTo(&v.Description) &&
		p.key("initialBid", false) && p.intTo(&v.InitialBid) &&
		p.key("reserve", false) && p.intTo(&v.Reserve) &&
		p.key("dateTime", false) && p.intTo(&v.DateTime) &&
		p.key("expires", false) && p.intTo(&v.Expires) &&
		p.key("seller", false) && p.intTo(&v.Seller) &&
		p.key("category", false) && p.intTo(&v.Category) &&
		p.key("extra", false) && p.strTo(&v.Extra) &&
		p.lit("}")
	return &v, ok
}

func (p *fastParser) bid() (*Bid, bool) {
	var v Bid
	ok := p.lit("{") &&
		p.key("auction", true) && p.intTo(&v.Auction) &&
		p.key("bidder", false) && p.intTo(&v.Bidder) &&
		p.key("price", false) && p.intTo(&v.Price) &&
		p.key("channel", false) && p.strTo(&v.Channel) &&
		p.key("url", false) && p.strTo(&v.URL) &&
		p.key("dateTime", false) && p.intTo(&v.DateTime) &&
		p.key("extra", false) && p.strTo(&v.Extra) &&
		p.lit("}")
	return &v, ok
}

func (p *fastParser) intTo(dst *int64) bool {
	v, ok := p.int()
	*dst = v
	return ok
}

func (p *fastParser) strTo(dst *string) bool {
	v, ok := p.str()
	*dst = v
	return ok
}

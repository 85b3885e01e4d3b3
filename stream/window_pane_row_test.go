package stream

import (
	"bytes"
	"testing"
)

// decodeRow never panics, and accepts exactly what encodeRow writes: a row
// it decodes encodes back to the same bytes.
func FuzzDecodeRow(f *testing.F) {
	f.Add(encodeRow(5200, nil))
	f.Add(encodeRow(5200, []rowPane{{start: 4200, agg: []byte{0, 0, 0, 0, 0, 0, 0, 1}}, {start: 4400, agg: []byte("x")}}))
	f.Add(encodeRow(-1, []rowPane{{start: -1 << 63, agg: nil}, {start: 1<<63 - 1, agg: make([]byte, 200)}}))
	f.Add([]byte{rowFormat, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0x80, 0x00})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, v []byte) {
		next, panes, err := decodeRow(nil, v)
		if err != nil {
			return
		}
		if got := encodeRow(next, panes); !bytes.Equal(got, v) {
			t.Fatalf("decoded %x as next %d, %d panes, which encode as %x", v, next, len(panes), got)
		}
	})
}

func TestDecodeRowRejects(t *testing.T) {
	good := encodeRow(5200, []rowPane{{start: 4200, agg: []byte{1}}, {start: 4400, agg: []byte{2, 3}}})
	for name, v := range map[string][]byte{
		"empty":          nil,
		"format":         append([]byte{2}, good[1:]...),
		"short header":   good[:rowHeader-1],
		"short pane":     good[:rowHeader+5],
		"short agg":      good[:len(good)-1],
		"out of order":   encodeRow(5200, []rowPane{{start: 4400, agg: []byte{1}}, {start: 4200, agg: []byte{2}}}),
		"same start":     encodeRow(5200, []rowPane{{start: 4400, agg: []byte{1}}, {start: 4400, agg: []byte{2}}}),
		"long varint":    append(append(good[:rowHeader+8:rowHeader+8], 0x81, 0x00), 1),
		"varint overrun": append(good[:rowHeader+8:rowHeader+8], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		if _, _, err := decodeRow(nil, v); err == nil {
			t.Errorf("%s: %x decoded", name, v)
		}
	}
	if next, panes, err := decodeRow(nil, good); err != nil || next != 5200 || len(panes) != 2 || panes[1].start != 4400 ||
		!bytes.Equal(panes[1].agg, []byte{2, 3}) {
		t.Fatalf("good row: %d %v %v", next, panes, err)
	}
}

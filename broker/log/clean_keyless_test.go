package log

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// nullableKeyBatch builds an uncompressed batch whose records have the given
// keys (nil: a null key) and value "v".
func nullableKeyBatch(keys ...*string) []byte {
	var raw []byte
	for i, k := range keys {
		body := []byte{0}
		body = binary.AppendVarint(body, 0)
		body = binary.AppendVarint(body, int64(i))
		if k == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(*k)))
			body = append(body, *k...)
		}
		body = binary.AppendVarint(body, 1)
		body = append(body, 'v')
		body = binary.AppendVarint(body, 0)
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	b := testBatch{records: len(keys)}.build()
	out := append(b[:batchHeaderSize:batchHeaderSize], raw...)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	binary.BigEndian.PutUint32(out[offCRC:], BatchCRC(out))
	return out
}

// TestKeylessRecordError: a compacted log refuses an append holding a
// keyless record with a *RecordError naming the record's index across the
// appended batches (matching ErrInvalidRecord and ErrCorruptBatch); nothing
// is appended. Other logs accept it.
func TestKeylessRecordError(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: compactCfg()})
	defer l.Close()
	batches := append(nullableKeyBatch(val("a"), val("b")), nullableKeyBatch(val("c"), nil, val("d"))...)
	_, err := l.Append(batches, true)
	var re *RecordError
	if !errors.As(err, &re) || re.Index != 3 || !errors.Is(err, ErrInvalidRecord) || !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("append: %v (%+v), want a RecordError at index 3", err, re)
	}
	if re.Message != "Compacted topic cannot accept message without key" {
		t.Fatalf("message %q", re.Message)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d after a refused append", l.LogEndOffset())
	}
	if _, err := l.Append(nullableKeyBatch(nil), true); !errors.As(err, &re) || re.Index != 0 {
		t.Fatalf("first record keyless: %v", err)
	}
	mustAppend(t, l, nullableKeyBatch(val("a")), true)
	plain := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/q"})
	defer plain.Close()
	mustAppend(t, plain, batches, true)
}

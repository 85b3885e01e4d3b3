package txn

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMarkerBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := MarkerBatch(77, 5, commit, 3, 1234)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if int(binary.BigEndian.Uint32(b[8:]))+12 != len(b) || uint32(rb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatal("length or crc wrong")
		}
		if rb.Attributes != 0x30 || rb.ProducerID != 77 || rb.ProducerEpoch != 5 || rb.FirstSequence != -1 || rb.NumRecords != 1 {
			t.Fatalf("header %+v", rb)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		var k kmsg.ControlRecordKey
		var v kmsg.EndTxnMarker
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatal(err)
		}
		if err := v.ReadFrom(r.Value); err != nil {
			t.Fatal(err)
		}
		want := kmsg.ControlRecordKeyTypeAbort
		if commit {
			want = kmsg.ControlRecordKeyTypeCommit
		}
		if k.Type != want || v.CoordinatorEpoch != 3 {
			t.Fatalf("key %+v value %+v", k, v)
		}
	}
}

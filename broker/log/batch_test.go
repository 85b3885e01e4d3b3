package log

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestValidateBatch(t *testing.T) {
	good := func() []byte { return testBatch{records: 3, valueSize: 10, firstTs: 1000, tsStep: 5}.build() }
	fixCRC := func(b []byte) []byte { binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b)); return b }
	cases := []struct {
		name string
		b    func() []byte
		ok   bool
	}{
		{"good", good, true},
		{"gzip", func() []byte { return testBatch{records: 5, valueSize: 50, codec: codecGzip}.build() }, true},
		{"snappy", func() []byte { return testBatch{records: 5, valueSize: 50, codec: codecSnappy}.build() }, true},
		{"snappy xerial", func() []byte {
			return testBatch{records: 5, valueSize: 50, codec: codecSnappy, xerial: true}.build()
		}, true},
		{"lz4", func() []byte { return testBatch{records: 5, valueSize: 50, codec: codecLZ4}.build() }, true},
		{"zstd", func() []byte { return testBatch{records: 5, valueSize: 50, codec: codecZstd}.build() }, true},
		{"zstd count says 6 of 5", func() []byte {
			b := testBatch{records: 5, valueSize: 50, codec: codecZstd}.build()
			binary.BigEndian.PutUint32(b[offNumRecords:], 6)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5)
			return fixCRC(b)
		}, false},
		{"gzip garbage", func() []byte {
			b := testBatch{records: 2, valueSize: 50}.build()
			b[offAttributes+1] |= codecGzip
			return fixCRC(b)
		}, false},
		{"snappy bomb claim", func() []byte {
			b := testBatch{records: 1}.build()[:batchHeaderSize]
			b = append(b, 0xff, 0xff, 0xff, 0xff, 0x0f, 0) // declared 4 GiB
			binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
			b[offAttributes+1] |= codecSnappy
			return fixCRC(b)
		}, false},
		{"producer", func() []byte { return testBatch{records: 2, producerID: 7, seq: 3}.build() }, true},
		{"short", func() []byte { return good()[:40] }, false},
		{"length too big", func() []byte { b := good(); binary.BigEndian.PutUint32(b[offLength:], 1<<20); return b }, false},
		{"length too small", func() []byte { b := good(); binary.BigEndian.PutUint32(b[offLength:], 10); return b }, false},
		{"magic 1", func() []byte { b := good(); b[offMagic] = 1; return b }, false},
		{"bad crc", func() []byte { b := good(); b[len(b)-1] ^= 1; return b }, false},
		{"codec 5", func() []byte { b := good(); b[offAttributes+1] |= 5; return fixCRC(b) }, false},
		{"count mismatch", func() []byte { b := good(); binary.BigEndian.PutUint32(b[offNumRecords:], 2); return fixCRC(b) }, false},
		{"lastOffsetDelta mismatch", func() []byte {
			b := good()
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5)
			return fixCRC(b)
		}, false},
		{"zero records", func() []byte {
			b := good()[:batchHeaderSize]
			binary.BigEndian.PutUint32(b[offLength:], batchHeaderSize-logOverhead)
			binary.BigEndian.PutUint32(b[offNumRecords:], 0)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return fixCRC(b)
		}, false},
		{"count says 4 but 3 present", func() []byte {
			b := good()
			binary.BigEndian.PutUint32(b[offNumRecords:], 4)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 3)
			return fixCRC(b)
		}, false},
		{"timestamp below -1", func() []byte {
			b := good()
			binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(1<<63))
			return fixCRC(b)
		}, false},
		{"pid without sequence (a coordinator's batch)", func() []byte {
			b := good()
			binary.BigEndian.PutUint64(b[offProducerID:], 5)
			return fixCRC(b)
		}, true},
		{"pid with sequence below -1", func() []byte {
			b := good()
			binary.BigEndian.PutUint64(b[offProducerID:], 5)
			binary.BigEndian.PutUint32(b[offBaseSequence:], 0xfffffffe)
			return fixCRC(b)
		}, false},
		{"txn without pid", func() []byte {
			b := good()
			b[offAttributes+1] |= attrTransactional
			return fixCRC(b)
		}, false},
		{"trailing garbage in records", func() []byte {
			b := append(good(), 0)
			binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
			return fixCRC(b)
		}, false},
		{"record offset delta wrong", func() []byte {
			b := good()
			// first record: length varint (1 byte), attributes, tsDelta 0 (1 byte), offsetDelta at +3
			b[batchHeaderSize+3] = 2 // zig-zag 1
			return fixCRC(b)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validateBatch(c.b(), nil)
			if c.ok && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("got %v, want ErrCorruptBatch", err)
			}
		})
	}
}

func TestValidateComputesMaxTimestamp(t *testing.T) {
	b := testBatch{records: 4, firstTs: 1000, tsStep: 10}.build()
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], 5) // wrong max, as a buggy client might send
	binary.BigEndian.PutUint32(b[offCRC:], BatchCRC(b))
	v, err := validateBatch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.recordsMaxTimestamp != 1030 {
		t.Fatalf("records max %d, want 1030", v.recordsMaxTimestamp)
	}
}

// FuzzValidateBatch: the validator never panics, and accepts only batches
// whose framing and CRC are right.
func FuzzValidateBatch(f *testing.F) {
	f.Add(testBatch{records: 3, valueSize: 10, firstTs: 1000, tsStep: 5}.build())
	f.Add(testBatch{records: 3, valueSize: 20, codec: codecZstd}.build())
	f.Add(testBatch{records: 3, valueSize: 20, codec: codecGzip}.build())
	f.Add(testBatch{records: 3, valueSize: 20, codec: codecLZ4}.build())
	f.Add(testBatch{records: 3, valueSize: 20, codec: codecSnappy, xerial: true}.build())
	f.Add(testBatch{records: 2, producerID: 1, seq: 0, txn: true}.build())
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := validateBatch(b, nil)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error not ErrCorruptBatch: %v", err)
			}
			return
		}
		if v.hdr.Size() != int64(len(b)) || BatchCRC(b) != v.hdr.CRC || v.hdr.Magic != 2 {
			t.Fatalf("accepted a bad batch")
		}
		recordTimestamps(b, nil, func(o, ts int64) bool { return true })
		// splitAndValidate agrees on a single batch.
		if _, err := splitAndValidate(b, &Config{MaxMessageBytes: 1 << 30}, nil); err != nil {
			t.Fatalf("split rejects what validate accepts: %v", err)
		}
	})
}

// FuzzSplitBatches: concatenations never panic and are all-or-nothing.
func FuzzSplitBatches(f *testing.F) {
	a := testBatch{records: 2}.build()
	b := testBatch{records: 1, valueSize: 30}.build()
	f.Add(append(append([]byte{}, a...), b...))
	f.Add(append(append([]byte{}, a...), b[:20]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		vs, err := splitAndValidate(data, &Config{MaxMessageBytes: 1 << 20}, nil)
		if err != nil {
			return
		}
		var n int64
		for _, v := range vs {
			n += v.hdr.Size()
		}
		if n != int64(len(data)) {
			t.Fatalf("batches cover %d of %d bytes", n, len(data))
		}
	})
}

// FuzzIndexFiles: the index readers never panic and return only sorted
// entries.
func FuzzIndexFiles(f *testing.F) {
	var o offsetIndex
	o.add(3, 100)
	o.add(9, 900)
	var ti timeIndex
	ti.add(1000, 3)
	ti.add(2000, 9)
	f.Add(append(indexHeader(offsetIndexMagic, 50), o.b...), append(indexHeader(timeIndexMagic, 50), ti.b...))
	f.Add([]byte("WOIX"), []byte("WTIX\x01"))
	f.Fuzz(func(t *testing.T, ob, tb []byte) {
		if x, err := parseOffsetIndex(ob, 50, 1<<20); err == nil {
			for i := 1; i < x.len(); i++ {
				r0, p0 := x.entry(i - 1)
				r1, p1 := x.entry(i)
				if r1 <= r0 || p1 <= p0 {
					t.Fatal("unsorted offset index accepted")
				}
			}
			x.lookup(5)
			x.truncatePos(500)
		}
		if x, err := parseTimeIndex(tb, 50); err == nil {
			for i := 1; i < x.len(); i++ {
				t0, _ := x.entry(i - 1)
				t1, _ := x.entry(i)
				if t1 <= t0 {
					t.Fatal("unsorted time index accepted")
				}
			}
			x.before(1500)
		}
		decodeCheckpoint(ob)
		decodeLogStart(tb)
	})
}

func TestIndexLookups(t *testing.T) {
	var o offsetIndex
	o.add(10, 1000)
	o.add(20, 2000)
	o.add(30, 3000)
	for _, c := range []struct {
		rel  uint32
		want int64
	}{{0, 0}, {9, 0}, {10, 1000}, {15, 1000}, {20, 2000}, {29, 2000}, {30, 3000}, {1 << 30, 3000}} {
		if got := o.lookup(c.rel); got != c.want {
			t.Errorf("lookup(%d) = %d, want %d", c.rel, got, c.want)
		}
	}
	var ti timeIndex
	ti.add(100, 5)
	ti.add(200, 15)
	ti.add(300, 25)
	for _, c := range []struct {
		ts   int64
		rel  uint32
		okay bool
	}{{50, 0, false}, {100, 0, false}, {101, 5, true}, {200, 5, true}, {250, 15, true}, {1000, 25, true}} {
		rel, ok := ti.before(c.ts)
		if ok != c.okay || (ok && rel != c.rel) {
			t.Errorf("before(%d) = %d,%v want %d,%v", c.ts, rel, ok, c.rel, c.okay)
		}
	}
	o.truncatePos(2000)
	if o.len() != 1 {
		t.Fatalf("truncatePos left %d entries", o.len())
	}
	ti.truncateRel(15)
	if ti.len() != 1 {
		t.Fatalf("truncateRel left %d entries", ti.len())
	}
}

func TestMetaFilesRoundTrip(t *testing.T) {
	c := checkpoint{clean: true, segBase: 100, pos: 4096, next: 150, maxTs: 99, maxTsOff: 140}
	got, err := decodeCheckpoint(c.encode())
	if err != nil || got != c {
		t.Fatalf("checkpoint round trip: %+v %v", got, err)
	}
	b := c.encode()
	b[20] ^= 1
	if _, err := decodeCheckpoint(b); err == nil {
		t.Fatal("corrupt checkpoint accepted")
	}
	if v, err := decodeLogStart(encodeLogStart(77)); err != nil || v != 77 {
		t.Fatalf("log start round trip: %d %v", v, err)
	}
}

// FuzzValidateRecords wraps arbitrary record bytes in a batch header with a
// correct length and CRC, so the fuzzer reaches the record parser.
func FuzzValidateRecords(f *testing.F) {
	good := testBatch{records: 3, valueSize: 5, firstTs: 10, tsStep: 1}.build()
	f.Add(good[batchHeaderSize:], int32(3), int64(10))
	f.Add([]byte{2, 0}, int32(1), int64(-1))
	f.Fuzz(func(t *testing.T, recs []byte, count int32, firstTs int64) {
		b := append(append([]byte(nil), good[:batchHeaderSize]...), recs...)
		be := binary.BigEndian
		be.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
		be.PutUint32(b[offNumRecords:], uint32(count))
		be.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
		be.PutUint64(b[offFirstTimestamp:], uint64(firstTs))
		be.PutUint32(b[offCRC:], BatchCRC(b))
		v, err := validateBatch(b, nil)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error not ErrCorruptBatch: %v", err)
			}
			return
		}
		n := 0
		if !recordTimestamps(b, nil, func(o, ts int64) bool {
			if o != int64(n) || ts > v.recordsMaxTimestamp {
				t.Fatalf("record %d: offset %d ts %d (max %d)", n, o, ts, v.recordsMaxTimestamp)
			}
			n++
			return true
		}) || n != int(count) {
			t.Fatalf("walked %d records of %d", n, count)
		}
	})
}

// FuzzCompressedPayload: arbitrary compressed payloads (every codec) behind
// a valid header and CRC never panic or exhaust memory, and fail with
// ErrCorruptBatch unless they decode to valid records.
func FuzzCompressedPayload(f *testing.F) {
	for c := codecGzip; c <= codecZstd; c++ {
		b := testBatch{records: 2, valueSize: 30, codec: c}.build()
		f.Add(uint8(c), b[batchHeaderSize:], int32(2))
	}
	f.Add(uint8(codecSnappy), testBatch{records: 2, valueSize: 30, codec: codecSnappy, xerial: true}.build()[batchHeaderSize:], int32(2))
	f.Fuzz(func(t *testing.T, codec uint8, payload []byte, count int32) {
		b := testBatch{records: 1}.build()[:batchHeaderSize]
		b = append(b, payload...)
		be := binary.BigEndian
		be.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
		be.PutUint16(b[offAttributes:], uint16(codec&7))
		be.PutUint32(b[offNumRecords:], uint32(count))
		be.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
		be.PutUint32(b[offCRC:], BatchCRC(b))
		if _, err := validateBatch(b, nil); err != nil && !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("error not ErrCorruptBatch: %v", err)
		}
		recordTimestamps(b, nil, func(o, ts int64) bool { return true })
	})
}

// TestCheckRecordFieldErrors: each malformed field of a record body is named
// in the error, and a valid body passes.
func TestCheckRecordFieldErrors(t *testing.T) {
	for _, c := range []struct {
		rec  []byte
		want string
	}{
		{[]byte{0, 0, 0, 0x80}, "bad varint in key length"},
		{[]byte{0, 0, 0, 0x01, 0x80}, "bad varint in value length"},
		{[]byte{0, 0, 0, 0x01, 0x06, 'a'}, "bad value length"},
		{[]byte{0, 0, 0, 0x01, 0x01, 0x02, 0x80}, "bad varint in header key length"},
		{[]byte{0, 0, 0, 0x01, 0x01, 0x02, 0x02, 'h', 0x01}, ""},
	} {
		_, _, err := checkRecord(c.rec)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%x: %s", c.rec, err.reason)
		case c.want != "" && (err == nil || err.reason != c.want):
			t.Errorf("%x: got %v, want %q", c.rec, err, c.want)
		}
	}
}

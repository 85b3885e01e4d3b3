package log

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compressed batches. The log decompresses a produced batch only to check
// its records (count, offset deltas, framing, timestamps) as Kafka does,
// and a stored one only for a record-level timestamp lookup; the stored
// bytes stay exactly as the producer compressed them.
//
// Decompression is streamed record by record, so memory stays at about one
// record whatever the compression ratio (no decompression bomb): only a
// raw snappy block must be decoded whole, and its declared size is checked
// against snappy's maximum expansion first.

// Kafka compression codecs (attributes bits 0-2).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// zstdMaxWindow bounds the window a zstd frame may ask for (memory per
// decoder); Kafka producers use far smaller ones.
const zstdMaxWindow = 32 << 20

// codecs pools decompressors. The zero value is ready; it is goroutine-safe.
type codecs struct {
	gzip sync.Pool // *gzip.Reader
	lz4  sync.Pool // *lz4.Reader
	zstd sync.Pool // *zstd.Decoder
	bufr sync.Pool // *bufio.Reader
	snap sync.Pool // *[]byte: decoded raw snappy blocks (validation)
}

// records returns a reader of the uncompressed record bytes of a
// compressed batch's payload, and a func to release it.
func (c *codecs) records(codec int, payload []byte) (*bufio.Reader, func(), error) {
	var r io.Reader
	release := func() {}
	src := bytes.NewReader(payload)
	switch codec {
	case codecGzip:
		zr, _ := c.gzip.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(src)
		} else {
			err = zr.Reset(src)
		}
		if err != nil {
			return nil, nil, err
		}
		r, release = zr, func() { c.gzip.Put(zr) }
	case codecSnappy:
		sr, err := snappyReader(payload)
		if err != nil {
			return nil, nil, err
		}
		r = sr
	case codecLZ4:
		lr, _ := c.lz4.Get().(*lz4.Reader)
		if lr == nil {
			lr = lz4.NewReader(src)
		} else {
			lr.Reset(src)
		}
		r, release = lr, func() { c.lz4.Put(lr) }
	case codecZstd:
		zd, _ := c.zstd.Get().(*zstd.Decoder)
		var err error
		if zd == nil {
			zd, err = zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(zstdMaxWindow))
		} else {
			err = zd.Reset(src)
		}
		if err != nil {
			return nil, nil, err
		}
		r, release = zd, func() { zd.Reset(nil); c.zstd.Put(zd) }
	default:
		return nil, nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	br, _ := c.bufr.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(r, 32<<10)
	} else {
		br.Reset(r)
	}
	return br, func() { br.Reset(nil); c.bufr.Put(br); release() }, nil
}

// xerialHeader starts the snappy framing of the Java client
// (org.xerial.snappy.SnappyOutputStream): magic, version, compatible
// version; then chunks of (int32 length, raw snappy block).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyReader decodes Kafka snappy: xerial-framed (Java) or one raw block
// (other clients).
func snappyReader(p []byte) (io.Reader, error) {
	if len(p) >= 16 && bytes.Equal(p[:8], xerialMagic) {
		return &xerialReader{p: p[16:]}, nil
	}
	b, err := snappyBlock(p)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// snappyBlock decodes one raw snappy block after checking its declared
// length against snappy's largest possible expansion.
func snappyBlock(p []byte) ([]byte, error) {
	n, err := s2.DecodedLen(p)
	if err != nil {
		return nil, err
	}
	if n > 32*len(p)+64 {
		return nil, fmt.Errorf("snappy block claims %d bytes from %d", n, len(p))
	}
	return s2.Decode(nil, p)
}

type xerialReader struct {
	p   []byte // remaining chunks
	cur []byte // decoded bytes not yet read
}

func (x *xerialReader) Read(b []byte) (int, error) {
	for len(x.cur) == 0 {
		if len(x.p) == 0 {
			return 0, io.EOF
		}
		if len(x.p) < 4 {
			return 0, errors.New("truncated xerial snappy chunk")
		}
		n := int(binary.BigEndian.Uint32(x.p))
		if n > len(x.p)-4 {
			return 0, errors.New("xerial snappy chunk beyond data")
		}
		blk, err := snappyBlock(x.p[4 : 4+n])
		if err != nil {
			return 0, err
		}
		x.p, x.cur = x.p[4+n:], blk
	}
	n := copy(b, x.cur)
	x.cur = x.cur[n:]
	return n, nil
}

// walkRecordStream reads count records from r (the uncompressed records of
// a batch) and calls fn with each record's body (valid until the next
// call). The stream must end after the last record.
func walkRecordStream(r *bufio.Reader, count int32, fn func(i int32, rec []byte) error) error {
	var scratch []byte
	for i := int32(0); i < count; i++ {
		length, err := binary.ReadVarint(r)
		if err != nil {
			return fmt.Errorf("record %d: bad length: %v", i, err)
		}
		if length < 1 || length > 1<<31 {
			return fmt.Errorf("record %d: bad length %d", i, length)
		}
		if scratch, err = readN(r, scratch, int(length)); err != nil {
			return fmt.Errorf("record %d: %v", i, err)
		}
		if err := fn(i, scratch); err != nil {
			return err
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		if err != nil {
			return err
		}
		return errors.New("bytes after the last record")
	}
	return nil
}

// readN reads exactly n bytes into buf (reused), growing it in steps as
// bytes arrive, so a record that claims more than the stream holds cannot
// make us allocate its claim.
func readN(r io.Reader, buf []byte, n int) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < n {
		step := min(n-len(buf), 1<<20)
		if cap(buf)-len(buf) < step {
			nb := make([]byte, len(buf), len(buf)+step+len(buf)/2)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, io.ErrUnexpectedEOF
		}
	}
	return buf, nil
}

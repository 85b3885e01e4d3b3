package broker

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch encodes a valid RecordBatch v2 (uncompressed) holding values,
// with timestamps ts0, ts0+1, ...
func makeBatch(ts0 int64, values ...string) []byte {
	return makeProducerBatch(-1, -1, -1, false, ts0, values...)
}

// makeProducerBatch is makeBatch from producer pid/epoch starting at
// sequence seq, transactional or not.
func makeProducerBatch(pid int64, epoch int16, seq int32, txn bool, ts0 int64, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.NewRecord()
		r.TimestampDelta64 = int64(i)
		r.OffsetDelta = int32(i)
		r.Value = []byte(v)
		enc := r.AppendTo(nil) // Length 0 is one varint byte
		r.Length = int32(len(enc) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(len(values) - 1)
	b.FirstTimestamp = ts0
	b.MaxTimestamp = ts0 + int64(len(values)-1)
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, seq
	if txn {
		b.Attributes |= 0x10
	}
	b.NumRecords = int32(len(values))
	b.Records = recs
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func produceReq(version int16, acks int16, topic string, partition int32, batches []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batches
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchReq(version int16, topic string, id [16]byte, partition int32, offset int64, maxWaitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = 1
	req.MaxBytes = 50 << 20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, offset, 1<<20
	fp.LogStartOffset = -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// batchValues decodes the record values of concatenated uncompressed
// batches, skipping records below from and control batches.
func batchValues(data []byte, from int64) []string {
	var out []string
	for len(data) >= 61 {
		n := int(binary.BigEndian.Uint32(data[8:])) + 12
		if n > len(data) {
			break
		}
		var b kmsg.RecordBatch
		if b.ReadFrom(data[:n]) != nil {
			break
		}
		if b.Attributes&0x20 != 0 { // control batch (transaction marker): clients skip it
			data = data[n:]
			continue
		}
		recs := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			l, sz := binary.Varint(recs)
			if sz <= 0 || int(l)+sz > len(recs) {
				break
			}
			if r.ReadFrom(recs[:int(l)+sz]) != nil {
				break
			}
			if b.FirstOffset+int64(r.OffsetDelta) >= from {
				out = append(out, string(r.Value))
			}
			recs = recs[int(l)+sz:]
		}
		data = data[n:]
	}
	return out
}

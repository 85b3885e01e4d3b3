package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceErrors(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "pe", 1, "max.message.bytes", "200")
	c := dialRaw(t, b)
	good := makeBatch(1000, "a", "b")
	corrupt := slices.Clone(good)
	corrupt[len(corrupt)-1] ^= 0xff // CRC mismatch
	big := makeBatch(1000, string(make([]byte, 300)))

	cases := []struct {
		name     string
		req      *kmsg.ProduceRequest
		want     int16
		wantBase int64
	}{
		{"ok", produceReq(9, -1, "pe", 0, good), 0, 0},
		{"ok acks=1", produceReq(7, 1, "pe", 0, good), 0, 2},
		{"corrupt", produceReq(9, -1, "pe", 0, corrupt), kerr.CorruptMessage.Code, -1},
		{"truncated", produceReq(9, -1, "pe", 0, good[:30]), kerr.CorruptMessage.Code, -1},
		{"too large", produceReq(9, -1, "pe", 0, big), kerr.MessageTooLarge.Code, -1},
		{"unknown topic", produceReq(9, -1, "nope", 0, good), kerr.UnknownTopicOrPartition.Code, -1},
		{"unknown partition", produceReq(9, -1, "pe", 7, good), kerr.UnknownTopicOrPartition.Code, -1},
		{"bad acks", produceReq(9, 2, "pe", 0, good), kerr.InvalidRequiredAcks.Code, -1},
		{"internal", produceReq(9, -1, offsetsTopic, 0, good), kerr.InvalidTopicException.Code, -1},
	}
	for i, tc := range cases {
		resp := c.roundTrip(tc.req, int32(i)).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.want || p.BaseOffset != tc.wantBase {
			t.Errorf("%s: error %d base %d, want %d base %d", tc.name, p.ErrorCode, p.BaseOffset, tc.want, tc.wantBase)
		}
	}
	// v13 by topic ID.
	tp, _ := b.topics.get("pe")
	req := produceReq(13, -1, "", 0, good)
	req.Topics[0].TopicID = tp.id
	resp := c.roundTrip(req, 50).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Fatalf("v13: %+v", p)
	}
	req.Topics[0].TopicID = [16]byte{9}
	resp = c.roundTrip(req, 51).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("v13 unknown id: %+v", p)
	}
	if hw := tp.parts[0].HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
}

// acks=0 gets no response: the next request's response is the next frame.
func TestProduceAcksZeroNoResponse(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "z", 1)
	c := dialRaw(t, b)
	c.send(produceReq(9, 0, "z", 0, makeBatch(1, "x")), 1)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 2)
	tp, _ := b.topics.get("z")
	if leo := tp.parts[0].LogEndOffset(); leo != 1 {
		t.Fatalf("log end offset %d", leo)
	}
}

func TestFetchBasics(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "f", 1)
	tp, _ := b.topics.get("f")
	c := dialRaw(t, b)
	for i := range 5 {
		c.roundTrip(produceReq(9, -1, "f", 0, makeBatch(int64(1000+10*i), fmt.Sprint(i, "a"), fmt.Sprint(i, "b"))), int32(i))
	}
	// Read from the middle of a batch: whole batches come back.
	for _, v := range []int16{4, 11, 12} {
		resp := c.roundTrip(fetchReq(v, "f", tp.id, 0, 3, 0), 10).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 10 || p.LastStableOffset != 10 {
			t.Fatalf("v%d: %+v", v, p)
		}
		got := batchValues(p.RecordBatches, 3)
		want := []string{"1b", "2a", "2b", "3a", "3b", "4a", "4b"}
		if !slices.Equal(got, want) {
			t.Fatalf("v%d: values %v want %v", v, got, want)
		}
	}
	// v13+: by topic ID; an unknown ID is UNKNOWN_TOPIC_ID.
	resp := c.roundTrip(fetchReq(13, "", tp.id, 0, 0, 0), 11).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || resp.Topics[0].TopicID != tp.id || len(batchValues(p.RecordBatches, 0)) != 10 {
		t.Fatalf("v13: %+v", resp.Topics[0])
	}
	resp = c.roundTrip(fetchReq(13, "", [16]byte{7}, 0, 0, 0), 12).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("v13 unknown id: %+v", p)
	}
	// Out of range above the high watermark, and below the log start.
	resp = c.roundTrip(fetchReq(12, "f", tp.id, 0, 11, 5000), 13).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("above hw: %+v", p)
	}
	if _, err := tp.parts[0].DeleteRecords(4); err != nil {
		t.Fatal(err)
	}
	resp = c.roundTrip(fetchReq(12, "f", tp.id, 0, 1, 5000), 14).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 4 {
		t.Fatalf("below start: %+v", p)
	}
	// Partition byte limit: at least one batch, then the limit holds.
	req := fetchReq(12, "f", tp.id, 0, 4, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1
	resp = c.roundTrip(req, 15).(*kmsg.FetchResponse)
	if got := batchValues(resp.Topics[0].Partitions[0].RecordBatches, 4); !slices.Equal(got, []string{"2a", "2b"}) {
		t.Fatalf("max bytes 1: %v", got)
	}
}

// A long poll returns as soon as data is produced, not at MaxWait.
func TestFetchLongPollWakesOnProduce(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "lp", 2)
	tp, _ := b.topics.get("lp")
	fc := dialRaw(t, b)
	pc := dialRaw(t, b)

	req := fetchReq(12, "lp", tp.id, 0, 0, 60_000) // far beyond the test timeout
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, fp)
	fc.send(req, 1)
	waitInFlight(t, b, fc, 1) // the fetch is being handled (waiting) before the produce

	pc.roundTrip(produceReq(9, -1, "lp", 1, makeBatch(5, "wake")), 1)
	resp := fc.readResp(req, 1).(*kmsg.FetchResponse)
	var got []string
	for _, p := range resp.Topics[0].Partitions {
		got = append(got, batchValues(p.RecordBatches, 0)...)
	}
	if !slices.Equal(got, []string{"wake"}) {
		t.Fatalf("long poll returned %v", got)
	}
}

// Close ends long polls: the broker does not wait out MaxWait.
func TestCloseEndsLongPoll(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "cl", 1)
	tp, _ := b.topics.get("cl")
	c := dialRaw(t, b)
	c.send(fetchReq(12, "cl", tp.id, 0, 0, 60_000), 1)
	waitInFlight(t, b, c, 1) // read by the broker, so Close must answer it
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close waited for the long poll")
	}
	// The in-flight fetch was answered before the connection closed.
	req := fetchReq(12, "cl", tp.id, 0, 0, 0)
	c.readResp(req, 1)
	c.expectClosed()
}

func TestListOffsets(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "lo", 1)
	tp, _ := b.topics.get("lo")
	c := dialRaw(t, b)
	c.roundTrip(produceReq(9, -1, "lo", 0, makeBatch(100, "a", "b", "c")), 1) // 0-2, ts 100-102
	c.roundTrip(produceReq(9, -1, "lo", 0, makeBatch(500, "d", "e")), 2)      // 3-4, ts 500-501
	c.roundTrip(produceReq(9, -1, "lo", 0, makeBatch(200, "f")), 3)           // 5, ts 200
	if _, err := tp.parts[0].DeleteRecords(1); err != nil {
		t.Fatal(err)
	}
	type q struct {
		ts          int64
		off, wantTs int64
		code        int16
	}
	for _, x := range []q{
		{-2, 1, -1, 0},
		{-1, 6, -1, 0},
		{-3, 4, 501, 0},
		{400, 3, 500, 0},
		{9999, -1, -1, 0},
		{-7, -1, -1, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, x.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req, 9).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != x.code || (x.code == 0 && (p.Offset != x.off || (x.wantTs != -1 && p.Timestamp != x.wantTs))) {
			t.Errorf("ts %d: offset %d ts %d err %d, want offset %d ts %d err %d", x.ts, p.Offset, p.Timestamp, p.ErrorCode, x.off, x.wantTs, x.code)
		}
	}
}

func TestMetadata(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.AutoCreateTopics = true; c.DefaultPartitions = 3 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "m", 2)
	tp, _ := b.topics.get("m")
	c := dialRaw(t, b)
	for _, v := range []int16{0, 1, 4, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		resp := c.roundTrip(req, int32(v)).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Port != b.port {
			t.Fatalf("v%d brokers: %+v", v, resp.Brokers)
		}
		// Every topic, the internal ones flagged (v1+) so that clients
		// leave them out of regex subscriptions, as against Kafka.
		wantInternal := map[string]bool{"m": false, offsetsTopic: v >= 1, "__transaction_state": v >= 1, shareStateTopic: v >= 1}
		if len(resp.Topics) != len(wantInternal) {
			t.Fatalf("v%d all topics: %d topics, want %d: %+v", v, len(resp.Topics), len(wantInternal), resp.Topics)
		}
		for _, mt := range resp.Topics {
			internal, ok := wantInternal[*mt.Topic]
			if !ok || mt.ErrorCode != 0 || mt.IsInternal != internal || len(mt.Partitions) == 0 {
				t.Fatalf("v%d all topics: %s internal=%v err=%d, want internal=%v", v, *mt.Topic, mt.IsInternal, mt.ErrorCode, internal)
			}
			if v >= 10 && *mt.Topic == "m" && mt.TopicID != tp.id {
				t.Fatalf("v%d: topic id", v)
			}
		}
	}
	// Auto-create when allowed; not when the client says no; bad names.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	for _, n := range []string{"auto", "bad name"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp := c.roundTrip(req, 20).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("no auto create: %+v", resp.Topics)
	}
	req.AllowAutoTopicCreation = true
	resp = c.roundTrip(req, 21).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("auto create: %+v", resp.Topics[0])
	}
	// By ID (v12).
	req = kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: tp.id}, {TopicID: [16]byte{3}}}
	resp = c.roundTrip(req, 22).(*kmsg.MetadataResponse)
	if *resp.Topics[0].Topic != "m" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("by id: %+v", resp.Topics)
	}
	// The internal topics named.
	req = kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(offsetsTopic)}, {Topic: kmsg.StringPtr("__transaction_state")}}
	resp = c.roundTrip(req, 23).(*kmsg.MetadataResponse)
	for _, mt := range resp.Topics {
		if mt.ErrorCode != 0 || !mt.IsInternal {
			t.Fatalf("internal: %+v", mt)
		}
	}
}

// Pipelined produce requests on one connection land in the log in the
// order they were sent, with increasing offsets in the responses.
func TestPipelinedProduceOrder(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "po", 2)
	tp, _ := b.topics.get("po")
	c := dialRaw(t, b)
	const n = 60
	var out []byte
	var want []string
	for i := range n {
		// Mixed acks; the last one is acks=-1, so everything is visible
		// once it is answered.
		req := produceReq(9, int16([]int{1, -1}[i%2]), "po", 0, makeBatch(1, fmt.Sprint(i)))
		// Also write to partition 1 in the same request.
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 1, makeBatch(1, fmt.Sprint(i))
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		out = append(out, frame(req, int32(i))...)
		want = append(want, fmt.Sprint(i))
	}
	c.write(out)
	for i := range n {
		pr := kmsg.NewPtrProduceRequest()
		pr.Version = 9
		resp := c.readResp(pr, int32(i)).(*kmsg.ProduceResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.BaseOffset != int64(i) {
				t.Fatalf("request %d partition %d: base %d error %d", i, p.Partition, p.BaseOffset, p.ErrorCode)
			}
		}
	}
	for p := range int32(2) {
		fr := c.roundTrip(fetchReq(12, "po", tp.id, p, 0, 0), 1000).(*kmsg.FetchResponse)
		if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); !slices.Equal(got, want) {
			t.Fatalf("partition %d order: %v", p, got)
		}
	}
}

// A partition without records carries an empty record set, never a null
// one (librdkafka fails to parse a null one).
func TestFetchEmptyRecordsNotNull(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "en", 1)
	tp, _ := b.topics.get("en")
	c := dialRaw(t, b)
	for _, v := range []int16{4, 11, 12} {
		req := fetchReq(v, "en", tp.id, 0, 0, 0)
		c.send(req, 1)
		_, body, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if resp.IsFlexible() {
			body = body[1:] // header tags
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if rb := resp.Topics[0].Partitions[0].RecordBatches; rb == nil {
			t.Fatalf("v%d: null record set", v)
		}
	}
}

// acks=0 with an error closes the connection (after earlier responses).
func TestProduceAcksZeroErrorCloses(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	c.send(kmsg.NewPtrApiVersionsRequest(), 1)
	c.send(produceReq(9, 0, "missing", 0, makeBatch(1, "x")), 2)
	c.readResp(kmsg.NewPtrApiVersionsRequest(), 1)
	c.expectClosed()
}

// Requests touching different partition sets, and a partition named twice
// in one request, still append each partition in request order.
func TestPipelinedProduceOrderMixedPartitions(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "pm", 3)
	tp, _ := b.topics.get("pm")
	c := dialRaw(t, b)
	const n = 90
	want := map[int32][]string{}
	var out []byte
	for i := range n {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "pm"
		parts := [][]int32{{0}, {1, 2}, {2, 0, 2}}[i%3]
		for k, p := range parts {
			v := fmt.Sprintf("%d.%d", i, k)
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, makeBatch(1, v)
			rt.Partitions = append(rt.Partitions, rp)
			want[p] = append(want[p], v)
		}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		out = append(out, frame(req, int32(i))...)
	}
	c.write(out)
	for i := range n {
		pr := kmsg.NewPtrProduceRequest()
		pr.Version = 9
		resp := c.readResp(pr, int32(i)).(*kmsg.ProduceResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("request %d partition %d: %d", i, p.Partition, p.ErrorCode)
			}
		}
	}
	for p := range int32(3) {
		fr := c.roundTrip(fetchReq(12, "pm", tp.id, p, 0, 0), 1000+p).(*kmsg.FetchResponse)
		if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); !slices.Equal(got, want[p]) {
			t.Fatalf("partition %d: %v\nwant %v", p, got, want[p])
		}
	}
}

// waitInFlight waits until the broker's side of rc has at least n
// requests read and not yet answered.
func waitInFlight(t *testing.T, b *Broker, rc *rawConn, n int32) {
	t.Helper()
	ctx := testCtx(t)
	for {
		var sum int32
		b.mu.Lock()
		for c := range b.conns {
			if c.nc.RemoteAddr().String() == rc.nc.LocalAddr().String() {
				sum += c.pending.Load()
			}
		}
		b.mu.Unlock()
		if sum >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d requests in flight, want %d", sum, n)
		}
		time.Sleep(time.Millisecond)
	}
}

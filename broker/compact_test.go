package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	wlog "github.com/weirhq/weir/broker/log"
)

// TestCompactedTopicEndToEnd: a franz-go producer writes many versions of
// few keys (and tombstones) to a compacted topic with tiny segments, the
// cleaner runs, a consumer reads exactly the latest value per key with
// offsets preserved; a keyless record is refused with CORRUPT_MESSAGE.
func TestCompactedTopicEndToEnd(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "c", 1, "cleanup.policy", "compact", "segment.bytes", "1024",
		"min.cleanable.dirty.ratio", "0.01", "delete.retention.ms", "3600000")
	cl := newClient(t, b, kgo.DefaultProduceTopic("c"), kgo.ProducerLinger(0))
	want := map[string]string{}
	for i := range 300 {
		k := fmt.Sprint("key-", i%10)
		v := fmt.Sprint("value-", i)
		r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if i%10 == 3 && i > 250 {
			r.Value = nil // tombstone for key-3 near the end
			delete(want, k)
		} else {
			want[k] = v
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) { // Produce v8+ (franz-go sends v9+)
		t.Fatalf("keyless record: %v, want INVALID_RECORD", err)
	}
	l, ok := b.logs.Get("c", 0)
	if !ok {
		t.Fatal("no log")
	}
	sizeBefore := l.Size()
	n, err := b.logs.Clean(false)
	if err != nil || n != 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	if l.Size() >= sizeBefore/2 {
		t.Fatalf("size %d -> %d", sizeBefore, l.Size())
	}
	// Read everything back.
	cons := newClient(t, b, kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	count := 0
	for count == 0 || got["key-9"] == nil || string(got["key-9"].Value) != want["key-9"] {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			count++
			got[string(r.Key)] = r
			// Offsets preserved: value-i was produced at offset i.
			if r.Value != nil && string(r.Value) != fmt.Sprint("value-", r.Offset) {
				t.Errorf("offset %d holds %s", r.Offset, r.Value)
			}
		})
	}
	for k, v := range want {
		if got[k] == nil || string(got[k].Value) != v {
			t.Fatalf("key %s: got %v want %s", k, got[k], v)
		}
	}
	if r := got["key-3"]; r == nil || r.Value != nil {
		t.Fatalf("key-3 tombstone: %v", r)
	}
	if count > 300/2 {
		t.Fatalf("consumer read %d records: not compacted", count)
	}
}

// TestInternalOffsetsTopicCompacted: __consumer_offsets is compacted by the
// same cleaner; committed offsets survive the clean and a restart.
func TestInternalOffsetsTopicCompacted(t *testing.T) {
	dir := t.TempDir()
	start := func() *Broker {
		b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1; c.DataDir = dir })
		return b
	}
	b := start()
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "in", 2)
	adm := kadm.NewClient(newClient(t, b))
	// Internal topic configs cannot be altered over the protocol: tiny
	// segments directly on the log, so the commits span closed segments.
	l, _ := b.logs.Get("__consumer_offsets", 0)
	l.SetConfig(wlog.Config{SegmentBytes: 2048, Compact: true, RetentionMs: -1})
	for i := range 200 {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "in", Partition: int32(i % 2), At: int64(i), LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "g", offs)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", i, err, resp.Error())
		}
	}
	before := l.Size()
	if n, err := b.logs.Clean(true); err != nil || n < 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	if l.Size() >= before/2 {
		t.Fatalf("__consumer_offsets %d -> %d bytes", before, l.Size())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = start()
	adm = kadm.NewClient(newClient(t, b))
	got, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 198, 1: 199} {
		if o, ok := got.Lookup("in", p); !ok || o.At != want {
			t.Fatalf("partition %d: %+v, want %d", p, o, want)
		}
	}
}

// TestCompactedTopicTransactions: transactional writes to a compacted topic
// (rounds alternately committed and aborted, all on the same keys), then a
// clean, one more committed round and a clean: the aborted values are gone
// from the log, a read_committed and a read_uncommitted consumer both end
// with the last committed value of each key.
func TestCompactedTopicTransactions(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ctx", 1, "cleanup.policy", "compact", "segment.bytes", "2048")
	p := newClient(t, b, kgo.TransactionalID("weir-ctx"), kgo.DefaultProduceTopic("ctx"))
	round := func(r int, commit bool) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			rec := &kgo.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "r%d", r)}
			if err := p.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", r, err)
		}
	}
	for r := range 20 {
		round(r, r%2 == 0) // even rounds commit; the last (19) aborts
	}
	if _, err := b.logs.Clean(true); err != nil {
		t.Fatal(err)
	}
	round(20, true) // the producer still works after the clean
	if _, err := b.logs.Clean(true); err != nil {
		t.Fatal(err)
	}
	for _, iso := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		c := newClient(t, b, kgo.ConsumeTopics("ctx"), kgo.FetchIsolationLevel(iso),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		last := map[string]string{}
		var seen []string
		var offs []int64
		hw := int64(-1)
		for hw < 0 || len(seen) == 0 || last["k3"] != "r20" {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("timed out: %v", seen)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
			fs.EachRecord(func(r *kgo.Record) {
				last[string(r.Key)] = string(r.Value)
				seen = append(seen, string(r.Value))
				offs = append(offs, r.Offset)
				hw = r.Offset
			})
		}
		for k := range 4 {
			if v := last[fmt.Sprint("k", k)]; v != "r20" {
				t.Fatalf("%v: k%d = %s, want r20 (seen %v)", iso, k, v, seen)
			}
		}
		// Aborted data below the cleaner's progress is gone (the active
		// segment is never cleaned: read_uncommitted still sees aborted
		// records there, as with Kafka).
		l, _ := b.logs.Get("ctx", 0)
		cleanedTo, _ := l.CleanerProgress()
		if cleanedTo <= 0 {
			t.Fatalf("cleaner progress %d", cleanedTo)
		}
		for i, v := range seen {
			var r int
			fmt.Sscanf(v, "r%d", &r)
			if r%2 == 1 && (offs[i] < cleanedTo || iso == kgo.ReadCommitted()) {
				t.Fatalf("%v: aborted value %s readable after the clean (seen %v)", iso, v, seen)
			}
		}
		c.Close()
	}
}

// TestCleanerMetricsMove: the cleaner's Prometheus series start at zero and
// move with a pass: bytes read/written, passes, records removed, last pass
// duration, and the max dirty ratio of the look before it.
func TestCleanerMetricsMove(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1; c.Registerer = reg })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "cm", 1, "cleanup.policy", "compact", "segment.bytes", "1024", "min.cleanable.dirty.ratio", "0.01")
	get := func(name string) float64 {
		t.Helper()
		v, ok := metricValue(t, reg, name, nil)
		if !ok {
			t.Fatalf("metric %s missing", name)
		}
		return v
	}
	for _, n := range []string{"weir_log_cleaner_passes_total", "weir_log_cleaner_read_bytes_total", "weir_log_cleaner_written_bytes_total",
		"weir_log_cleaner_records_removed_total", "weir_log_cleaner_errors_total", "weir_log_cleaner_max_dirty_ratio"} {
		if v := get(n); v != 0 {
			t.Fatalf("%s = %v before any pass", n, v)
		}
	}
	if v := get("weir_log_cleaner_time_since_last_look_seconds"); v != -1 {
		t.Fatalf("time since last look %v before any look, want -1", v)
	}
	cl := newClient(t, b, kgo.DefaultProduceTopic("cm"), kgo.ProducerLinger(0))
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.logs.CleanOnce(false)
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	if v := get("weir_log_cleaner_passes_total"); v != 1 {
		t.Fatalf("passes %v, want 1", v)
	}
	if v := get("weir_log_cleaner_read_bytes_total"); v != float64(res.BytesRead) || v == 0 {
		t.Fatalf("read bytes %v, want %d", v, res.BytesRead)
	}
	if v := get("weir_log_cleaner_written_bytes_total"); v != float64(res.BytesWritten) || v == 0 {
		t.Fatalf("written bytes %v, want %d", v, res.BytesWritten)
	}
	if v := get("weir_log_cleaner_records_removed_total"); v != float64(res.RecordsRemoved) || v < 100 {
		t.Fatalf("records removed %v, want %d (>= 100)", v, res.RecordsRemoved)
	}
	if v := get("weir_log_cleaner_max_dirty_ratio"); v != res.DirtyRatio || v <= 0 {
		t.Fatalf("max dirty ratio %v, want %v (> 0)", v, res.DirtyRatio)
	}
	if v := get("weir_log_cleaner_last_pass_duration_seconds"); v <= 0 {
		t.Fatalf("last pass duration %v", v)
	}
	if v := get("weir_log_cleaner_time_since_last_look_seconds"); v < 0 {
		t.Fatalf("time since last look %v after a look", v)
	}
}

// TestAdminPartitionsEndpoint: GET /v1/partitions/{topic} reports the
// cleaner checkpoint computed by the log (-1 before the first pass, the
// pass's end after it), the dirty ratio, the last clean time and offsets;
// unknown topics are 404 and other methods 405, as JSON.
func TestAdminPartitionsEndpoint(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ad", 2, "cleanup.policy", "compact", "segment.bytes", "1024", "min.cleanable.dirty.ratio", "0.01")
	mustCreate(t, ctx, b, "plain", 1)
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	get := func(path string, wantCode int, into any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantCode || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s, want %d JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), wantCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var at AdminTopic
	get("/v1/partitions/ad", http.StatusOK, &at)
	if len(at.Partitions) != 2 || !at.Partitions[0].Compacted || at.Partitions[0].CleanedUpTo != -1 || at.Partitions[0].LastCleanMs != -1 {
		t.Fatalf("before any clean: %+v", at)
	}
	cl := newClient(t, b, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 200 {
		r := &kgo.Record{Topic: "ad", Partition: 0, Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint("v", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	get("/v1/partitions/ad", http.StatusOK, &at)
	if p := at.Partitions[0]; p.DirtyRatio != 1 || p.HighWatermark != 200 || p.LogEndOffset != 200 || p.SizeBytes <= 0 {
		t.Fatalf("before the clean: %+v (want dirty ratio 1: nothing cleaned yet)", p)
	}
	n, err := b.logs.Clean(false)
	if err != nil || n != 1 {
		t.Fatalf("clean: %d %v", n, err)
	}
	l, _ := b.logs.Get("ad", 0)
	cleanedTo, when := l.CleanerProgress()
	get("/v1/partitions/ad", http.StatusOK, &at)
	p := at.Partitions[0]
	if p.CleanedUpTo != cleanedTo || cleanedTo <= 0 || cleanedTo >= 200 || p.LastCleanMs != when.UnixMilli() || p.LastCleanTime == "" || p.DirtyRatio != 0 {
		t.Fatalf("after the clean: %+v, checkpoint %d at %v", p, cleanedTo, when)
	}
	if at.Partitions[1].CleanedUpTo != -1 || at.Partitions[1].HighWatermark != 0 {
		t.Fatalf("untouched partition: %+v", at.Partitions[1])
	}
	get("/v1/partitions/plain", http.StatusOK, &at)
	if at.Partitions[0].Compacted || at.Partitions[0].CleanedUpTo != -1 {
		t.Fatalf("delete topic: %+v", at.Partitions[0])
	}
	var ae AdminError
	get("/v1/partitions/nope", http.StatusNotFound, &ae)
	if !strings.Contains(ae.Error, "nope") {
		t.Fatalf("unknown topic error %q", ae.Error)
	}
	resp, err := http.Post(srv.URL+"/v1/partitions/ad", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
}

// TestProduceAppendErrorKeyless: the Produce error path for a keyless
// record refused by a compacted log, encoded and decoded with kmsg at each
// version: CORRUPT_MESSAGE before v8; from v8 INVALID_RECORD with one
// RecordErrors entry (the record's index, Kafka's message naming the
// partition) and ErrorMessage. Other append errors keep their code.
func TestProduceAppendErrorKeyless(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ck", 1, "cleanup.policy", "compact")
	l, _ := b.logs.Get("ck", 0)
	_, appendErr := l.Append(makeBatch(1, "keyless", "too"), true)
	if !errors.Is(appendErr, wlog.ErrInvalidRecord) {
		t.Fatalf("append: %v", appendErr)
	}
	roundTrip := func(version int16, err error) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		sp := kmsg.NewProduceResponseTopicPartition()
		produceAppendError(version, "ck", 0, err, false, &sp)
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "ck"
		rt.Partitions = append(rt.Partitions, sp)
		resp.Topics = append(resp.Topics, rt)
		back := kmsg.NewPtrProduceResponse()
		back.Version = version
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: decode: %v", version, err)
		}
		return back.Topics[0].Partitions[0]
	}
	const wantRecMsg = "Compacted topic cannot accept message without key in topic partition ck-0."
	for v := int16(3); v <= 12; v++ {
		sp := roundTrip(v, appendErr)
		if v < 8 {
			if sp.ErrorCode != kerr.CorruptMessage.Code || len(sp.ErrorRecords) != 0 || sp.ErrorMessage != nil {
				t.Fatalf("v%d: %+v, want CORRUPT_MESSAGE only", v, sp)
			}
			continue
		}
		if sp.ErrorCode != kerr.InvalidRecord.Code || len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 0 ||
			sp.ErrorRecords[0].ErrorMessage == nil || *sp.ErrorRecords[0].ErrorMessage != wantRecMsg ||
			sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "RecordError(batchIndex=0, message='"+wantRecMsg+"')") {
			t.Fatalf("v%d: %+v", v, sp)
		}
	}
	storage := fmt.Errorf("append: %w", wlog.ErrStorage)
	if sp := roundTrip(9, storage); sp.ErrorCode != kerr.KafkaStorageError.Code || len(sp.ErrorRecords) != 0 ||
		sp.ErrorMessage == nil || *sp.ErrorMessage != storage.Error() {
		t.Fatalf("storage error: %+v", sp)
	}
	if sp := roundTrip(7, storage); sp.ErrorCode != kerr.KafkaStorageError.Code || sp.ErrorMessage != nil {
		t.Fatalf("storage error v7: %+v", sp)
	}
}

// TestKeylessRecordOldProduceVersion: a franz-go producer limited to
// Produce v7 gets CORRUPT_MESSAGE for a keyless record on a compacted topic
// (Kafka's answer before KIP-467), and nothing is appended.
func TestKeylessRecordOldProduceVersion(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "ck7", 1, "cleanup.policy", "compact")
	cl := newClient(t, b, kgo.DefaultProduceTopic("ck7"), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(),
		kgo.MaxVersions(kversion.V2_3_0()))
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("keyless record at Produce v7: %v, want CORRUPT_MESSAGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
	if l, _ := b.logs.Get("ck7", 0); l.HighWatermark() != 1 {
		t.Fatalf("high watermark %d, want 1 (only the keyed record)", l.HighWatermark())
	}
}

// TestCompactedTopicTxnMarkersRemoved: aborted and committed transactions
// on a compacted topic (delete.retention.ms=0) whose values are then
// overwritten; after a few cleaning passes the markers of transactions with
// no data left are gone from the log, a read_committed Fetch over the
// cleaned range carries no aborted transactions any more, and consumers
// still read the latest value of each key.
func TestCompactedTopicTxnMarkersRemoved(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1 })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "cmk", 1, "cleanup.policy", "compact", "segment.bytes", "2048", "delete.retention.ms", "0")
	p := newClient(t, b, kgo.TransactionalID("weir-cmk"), kgo.DefaultProduceTopic("cmk"))
	for r := range 10 {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "t%d", r)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(r%2 == 0)); err != nil {
			t.Fatal(err)
		}
	}
	plain := newClient(t, b, kgo.DefaultProduceTopic("cmk"), kgo.ProducerLinger(0))
	overwrite := func(round int) {
		for i := range 40 {
			if err := plain.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%3), Value: fmt.Appendf(nil, "n%d-%d", round, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	l, _ := b.logs.Get("cmk", 0)
	if n := len(l.AbortedTransactions(0, l.HighWatermark())); n != 5 {
		t.Fatalf("%d aborted transactions before cleaning, want 5", n)
	}
	var removed int64
	for round := range 3 {
		overwrite(round)
		res, err := l.Clean(wlog.CleanOptions{Force: true})
		if err != nil || !res.Cleaned {
			t.Fatalf("pass %d: %+v %v", round, res, err)
		}
		removed += res.MarkersRemoved
	}
	cleanedTo, _ := l.CleanerProgress()
	if removed < 9 {
		t.Fatalf("%d markers removed, want at least 9 of 10 (the producer's last transaction keeps its marker)", removed)
	}
	// A read_committed Fetch from the start, as a client sends it.
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 0, 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "cmk"
	tp, _ := b.topics.get("cmk")
	rt.TopicID = tp.id // franz-go sends Fetch v13+ (topics by ID)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := newClient(t, b).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fp := kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(fp.ErrorCode))
	}
	for _, a := range fp.AbortedTransactions {
		if a.FirstOffset < cleanedTo {
			t.Fatalf("aborted transaction at %d still listed below the cleaner checkpoint %d: %+v", a.FirstOffset, cleanedTo, fp.AbortedTransactions)
		}
	}
	markers := 0
	for data := fp.RecordBatches; len(data) > 0; {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data); err != nil {
			t.Fatal(err)
		}
		if rb.Attributes&0x20 != 0 && rb.FirstOffset < cleanedTo {
			markers++
		}
		data = data[12+int(rb.Length):]
	}
	if markers > 1 {
		t.Fatalf("%d markers below the cleaner checkpoint %d, want at most the last transaction's", markers, cleanedTo)
	}
	c := newClient(t, b, kgo.ConsumeTopics("cmk"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[string]string{}
	for last["k0"] != "n2-39" || last["k1"] != "n2-37" || last["k2"] != "n2-38" {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out: %v", last)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) { last[string(r.Key)] = string(r.Value) })
	}
}

// TestOffsetsTopicTxnMarkersCleaned: transactional offset commits (some
// aborted) in __consumer_offsets, each superseding the last, cleaned three
// times with delete.retention.ms 0: markers whose transaction has no data
// left are removed, and after a restart (replay of the cleaned log) the
// group's committed offset is the last committed transaction's.
func TestOffsetsTopicTxnMarkersCleaned(t *testing.T) {
	dir := t.TempDir()
	start := func() *Broker {
		b, _ := testBroker(t, func(c *Config) { c.CleanerInterval = -1; c.DataDir = dir })
		return b
	}
	b := start()
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "in", 1)
	mustCreate(t, ctx, b, "out", 1)
	l, _ := b.logs.Get("__consumer_offsets", 0)
	l.SetConfig(wlog.Config{SegmentBytes: 2048, Compact: true, RetentionMs: -1, DeleteRetentionMs: -1})
	p := newClient(t, b, kgo.TransactionalID("weir-offs"), kgo.DefaultProduceTopic("out"))
	want := int64(-1)
	round := func(r int) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid, epoch, err := p.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "weir-offs", pid, epoch, "g"
		ar, err := p.Request(ctx, add)
		if err != nil || ar.(*kmsg.AddOffsetsToTxnResponse).ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, ar)
		}
		commit := kmsg.NewPtrTxnOffsetCommitRequest()
		commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "weir-offs", "g", pid, epoch, -1
		ct := kmsg.NewTxnOffsetCommitRequestTopic()
		ct.Topic = "in"
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = 0, int64(r+1), -1
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		cr, err := p.Request(ctx, commit)
		if err != nil || cr.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, cr)
		}
		ok := r%3 != 2
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(ok)); err != nil {
			t.Fatalf("end %d: %v", r, err)
		}
		if ok {
			want = int64(r + 1)
		}
	}
	for phase := range 3 {
		for r := range 15 {
			round(phase*15 + r)
		}
		if _, err := b.logs.Clean(true); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.logs.CleanerStats(); st.MarkersRemoved == 0 || st.AbortedPruned == 0 {
		t.Fatalf("cleaner stats %+v: no markers removed / aborted entries pruned", st)
	}
	p.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = start()
	got, err := kadm.NewClient(newClient(t, b)).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("in", 0); !ok || o.At != want {
		t.Fatalf("committed after cleaning and restart: %+v, want %d", o, want)
	}
}

package broker

import (
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClientQuotasWithKadm(t *testing.T) {
	b, cfg := testBroker(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	alice, app := "alice", "app"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 25}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("results: %+v", res)
	}
	for i, r := range res[:3] {
		if r.Err != nil {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
	}
	if !errors.Is(res[3].Err, kerr.InvalidRequest) {
		t.Fatalf("ip entity: %v", res[3].Err)
	}

	describe := func(adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) map[string]map[string]float64 {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, q := range d {
			vals := map[string]float64{}
			for _, v := range q.Values {
				vals[v.Key] = v.Value
			}
			out[q.Entity.String()] = vals
		}
		return out
	}
	all := describe(adm, false)
	if len(all) != 3 || all["{user=alice}"]["producer_byte_rate"] != 1024 || all["{client-id=<default>}"]["consumer_byte_rate"] != 4096 {
		t.Fatalf("all: %v", all)
	}
	users := describe(adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: kmsg.QuotasMatchTypeExact, MatchName: &alice})
	if len(users) != 2 {
		t.Fatalf("user=alice: %v", users)
	}
	strict := describe(adm, true, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: kmsg.QuotasMatchTypeExact, MatchName: &alice})
	if len(strict) != 1 {
		t.Fatalf("strict user=alice: %v", strict)
	}

	// Remove one key; survives a restart.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, _ := testBroker(t, func(c *Config) { *c = cfg; c.KafkaAddr = "127.0.0.1:0"; c.Registerer = prometheus.NewRegistry() })
	adm2 := kadm.NewClient(newClient(t, b2))
	after := describe(adm2, false)
	if len(after) != 2 || after["{client-id=app, user=alice}"]["request_percentage"] != 25 {
		t.Fatalf("after restart: %v", after)
	}
}

type throttleHook struct {
	mu    sync.Mutex
	total time.Duration
	n     int
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.total += d
}

func (h *throttleHook) get() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.total
}

// A real producer over its byte rate is throttled (franz-go sees and
// obeys ThrottleMillis); one without a quota is not; the throttle shows
// in the metrics.
func TestQuotaThrottlesRealProducer(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, _ := testBroker(t, func(c *Config) { c.principalForTest = asPrincipal; c.Registerer = reg })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "q", 1)
	adm := kadm.NewClient(newClient(t, b))
	alice := "alice"
	const rate = 64 << 10
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}}}); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 8<<10)
	produce := func(name string) *throttleHook {
		h := &throttleHook{}
		cl := clientAs(t, b, name, kgo.DefaultProduceTopic("q"), kgo.WithHooks(h), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		// 3 bursts' worth: the first burst is free, the rest is throttled.
		for range 3 * rate / len(value) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatalf("%s produce: %v", name, err)
			}
		}
		return h
	}
	if n, total := produce("alice").get(); n == 0 || total < 500*time.Millisecond {
		t.Fatalf("alice: %d throttles, %v in all; want throttling for ~2 bursts of her rate", n, total)
	}
	if n, _ := produce("bob").get(); n != 0 {
		t.Fatalf("bob (no quota) throttled %d times", n)
	}
	labels := map[string]string{"quota": "producer_byte_rate", "user": "alice", "client_id": ""}
	if got, ok := metricValue(t, reg, "weir_broker_quota_throttled_requests_total", labels); !ok || got == 0 {
		t.Fatalf("throttled requests metric: %v %v", got, ok)
	}
	if got, ok := metricValue(t, reg, "weir_broker_quota_throttle_seconds_total", labels); !ok || got < 0.5 {
		t.Fatalf("throttle seconds metric: %v %v", got, ok)
	}
	if _, ok := metricValue(t, reg, "weir_broker_quota_throttled_requests_total", map[string]string{"user": "bob"}); ok {
		t.Fatal("bob appears in the throttle metrics")
	}
}

// The broker mutes a throttled connection: a request sent right after a
// throttled response is not answered before the throttle time is over. A
// Produce version older than KIP-219 gets its response held back instead.
func TestQuotaMutesConnection(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.principalForTest = asPrincipal })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "q", 1)
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 2000}}}}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3000) // 1 burst (2000) + 1000 + framing: ~0.5 s of debt
	rc := dialRaw(t, b)
	corr := int32(1)
	send := func(req kmsg.Request) kmsg.Response {
		rc.write(frameAs(req, corr, "throttled"))
		resp := rc.readResp(req, corr)
		corr++
		return resp
	}
	resp := send(produceReq(9, 1, "q", 0, makeBatch(1, big))).(*kmsg.ProduceResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if throttle < 400*time.Millisecond {
		t.Fatalf("throttle %v, want ~0.5 s", throttle)
	}
	start := time.Now()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	send(av)
	if waited := time.Since(start); waited < throttle/2 {
		t.Fatalf("next request answered after %v, throttle was %v: connection not muted", waited, throttle)
	}

	// v5 (before KIP-219): the response itself waits.
	time.Sleep(throttle) // let the previous mute end
	start = time.Now()
	resp = send(produceReq(5, 1, "q", 0, makeBatch(1, big))).(*kmsg.ProduceResponse)
	held := time.Since(start)
	throttle = time.Duration(resp.ThrottleMillis) * time.Millisecond
	if throttle <= 0 || held < throttle/2 {
		t.Fatalf("v5: throttle %v, response after %v", throttle, held)
	}
}

// consumer_byte_rate throttles a real consumer's fetches;
// request_percentage throttles any request by its handling time.
func TestQuotaFetchAndRequestTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, _ := testBroker(t, func(c *Config) { c.principalForTest = asPrincipal; c.Registerer = reg })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "f", 1)
	prod := newClient(t, b, kgo.DefaultProduceTopic("f"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 4<<10)
	_, _ = rand.Read(value)
	for range 32 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(newClient(t, b))
	carol, rq := "carol", "rq"
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &carol}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 32 << 10}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &rq}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.001}}},
	}); err != nil {
		t.Fatal(err)
	}
	h := &throttleHook{}
	c := clientAs(t, b, "carol", kgo.ConsumeTopics("f"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(h),
		kgo.FetchMaxPartitionBytes(16<<10), kgo.FetchMaxBytes(16<<10))
	for got := 0; got < 32; {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("carol read %d/32", got)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	if n, total := h.get(); n == 0 || total < 500*time.Millisecond {
		t.Fatalf("consumer over 32 KiB/s reading 128 KiB: %d throttles, %v", n, total)
	}
	if v, ok := metricValue(t, reg, "weir_broker_quota_throttled_requests_total", map[string]string{"quota": "consumer_byte_rate", "user": "carol"}); !ok || v == 0 {
		t.Fatalf("consumer throttle metric %v %v", v, ok)
	}

	// 0.001% of a handler: 10 µs of handling per second. A burst allows
	// 10 µs; a few Metadata requests exceed it.
	rc := dialRaw(t, b)
	var throttled int32
	for i := range 20 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rc.write(frameAs(req, int32(i), "rq"))
		resp := rc.readResp(req, int32(i)).(*kmsg.MetadataResponse)
		throttled = max(throttled, resp.ThrottleMillis)
		if throttled > 0 {
			break
		}
	}
	if throttled == 0 {
		t.Fatal("20 Metadata requests at request_percentage 0.001 were never throttled")
	}
}

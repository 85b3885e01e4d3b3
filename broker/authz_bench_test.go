package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
	"github.com/weirhq/weir/broker/quota"
)

// BenchmarkAuthzOverhead: Metadata and acks=1 Produce round trips through
// franz-go against a broker without an authorizer (off) and one enforcing
// 1000 ACLs (on), in the same run; -count N alternates them.
func BenchmarkAuthzOverhead(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	setup := func(b *testing.B, on bool) *kgo.Client {
		var br *Broker
		if on {
			br, _ = aclBroker(b)
		} else {
			br, _ = testBroker(b, func(c *Config) { c.principalForTest = asPrincipal })
		}
		adm := kadm.NewClient(clientAs(b, br, "admin"))
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bench"); err != nil {
			b.Fatal(err)
		}
		if on {
			acl := kadm.NewACLs().Allow("User:app").Topics("bench").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
			mustACL(b, adm, acl)
			for i := range 1000 {
				mustACL(b, adm, kadm.NewACLs().Allow(fmt.Sprintf("User:u%d", i)).Topics(fmt.Sprintf("t%d", i)).Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
			}
		}
		return clientAs(b, br, "app", kgo.DefaultProduceTopic("bench"), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	}
	off, on := setup(b, false), setup(b, true)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("bench")
	req.Topics = append(req.Topics, rt)
	val := make([]byte, 1024)
	ops := map[string]func(cl *kgo.Client){
		"metadata": func(cl *kgo.Client) {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.Topics[0].ErrorCode != 0 {
				b.Fatal(err, resp)
			}
		},
		"produce": func(cl *kgo.Client) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
				b.Fatal(err)
			}
		},
	}
	for _, name := range []string{"metadata", "produce"} {
		op := ops[name]
		b.Run(name, func(b *testing.B) {
			// Interleaved: each iteration times one request on each broker,
			// so load changes hit both alike.
			var tOff, tOn time.Duration
			for i := range b.N {
				first, second := off, on
				if i%2 == 1 {
					first, second = on, off
				}
				s := time.Now()
				op(first)
				d1 := time.Since(s)
				s = time.Now()
				op(second)
				d2 := time.Since(s)
				if first == off {
					tOff, tOn = tOff+d1, tOn+d2
				} else {
					tOff, tOn = tOff+d2, tOn+d1
				}
			}
			b.ReportMetric(float64(tOff.Nanoseconds())/float64(b.N), "off-ns/op")
			b.ReportMetric(float64(tOn.Nanoseconds())/float64(b.N), "on-ns/op")
			b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
		})
	}
}

// BenchmarkSecurityHooks: the per-request cost of the two hooks conn.go
// calls (authorize before the handler, chargeQuota after), for a Produce
// request: without authorizer or quotas (the default), and with an
// authorizer of 1000 ACLs and a quota on the client.
func BenchmarkSecurityHooks(b *testing.B) {
	run := func(b *testing.B, br *Broker) {
		c := newConn(br, &memConn{})
		req := produceReq(9, 1, "bench", 0, makeBatch(1, "v"))
		a := lookupAPI(int16(kmsg.Produce))
		start := time.Now()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			s := &slot{api: a, clientID: "as:app", host: "/127.0.0.1"}
			wrap, refused := c.authorize(s, req)
			if refused {
				b.Fatal("refused")
			}
			call := wrap(func(context.Context) (kmsg.Response, error) { return req.ResponseKind(), nil })
			resp, _ := call(context.Background())
			c.chargeQuota(context.Background(), s, req, resp, start)
		}
	}
	b.Run("off", func(b *testing.B) {
		br, _ := testBroker(b)
		run(b, br)
	})
	b.Run("on", func(b *testing.B) {
		br, _ := aclBroker(b)
		var acls []authz.Binding
		for i := range 1000 {
			acls = append(acls, authz.Binding{ResourceType: authz.ResourceTopic, ResourceName: fmt.Sprintf("t%d", i), PatternType: authz.PatternLiteral,
				Principal: fmt.Sprintf("User:u%d", i), Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow})
		}
		acls = append(acls, authz.Binding{ResourceType: authz.ResourceTopic, ResourceName: "bench", PatternType: authz.PatternLiteral,
			Principal: "User:app", Host: "*", Operation: authz.OpWrite, Permission: authz.PermAllow})
		if _, err := br.authz.Create(acls); err != nil {
			b.Fatal(err)
		}
		if err := br.quotas.Alter(quota.Entity{{Type: quota.EntityClientID, Name: kmsg.StringPtr("as:app")}},
			[]quota.Op{{Key: quota.ProducerByteRate, Value: 1e12}}, false); err != nil {
			b.Fatal(err)
		}
		run(b, br)
	})
}

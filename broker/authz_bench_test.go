package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

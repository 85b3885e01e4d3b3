package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce, long-poll fetch, metadata and topic churn (create, grow,
// alter, delete the same names) run concurrently on many connections: no
// panic, no deadlock, every request answered, and Close returns.
func TestConcurrentChurn(t *testing.T) {
	b, _ := testBroker(t)
	const workers = 6
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := range workers {
		wg.Go(func() {
			c := dialRaw(t, b)
			corr := int32(0)
			for time.Now().Before(deadline) {
				corr++
				name := fmt.Sprintf("churn-%d", corr%3)
				var req kmsg.Request
				switch (int(corr) + w) % 6 {
				case 0:
					ct := kmsg.NewPtrCreateTopicsRequest()
					ct.Version = 4
					ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: name, NumPartitions: 2, ReplicationFactor: 1}}
					req = ct
				case 1:
					dt := kmsg.NewPtrDeleteTopicsRequest()
					dt.Version = 4
					dt.TopicNames = []string{name}
					req = dt
				case 2:
					req = produceReq(9, int16([]int{-1, 1}[corr%2]), name, corr%2, makeBatch(1, "x")) // not acks=0: its errors close the connection
				case 3:
					var id [16]byte
					if tp, ok := b.topics.get(name); ok {
						id = tp.id
					}
					req = fetchReq(13, name, id, corr%2, 0, 50)
				case 4:
					cp := kmsg.NewPtrCreatePartitionsRequest()
					cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: name, Count: 3}}
					req = cp
				case 5:
					ac := kmsg.NewPtrIncrementalAlterConfigsRequest()
					ac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{
						ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: name,
						Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}},
					}}
					req = ac
				}
				c.send(req, corr)
				if got, _, err := c.read(); err != nil || got != corr {
					errs <- fmt.Errorf("worker %d request %d (%s): corr %d err %v", w, corr, kmsg.NameForKey(req.Key()), got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := b.panics.Load(); n != 0 {
		t.Fatalf("%d panics", n)
	}
}

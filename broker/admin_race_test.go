package broker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
)

// Concurrent CreateTopics, DeleteTopics and CreatePartitions of the same
// few names, some waiting and some not (TimeoutMillis 0), run with -race.
// Every answer is one a client can expect, and once the broker has closed
// (it waits for the background changes) meta.json and the partition
// directories agree exactly: no orphan directory, no missing one.
func TestAdminConcurrentCreateDeleteGrow(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, b)
	allowed := map[int16]bool{0: true, kerr.TopicAlreadyExists.Code: true, kerr.UnknownTopicOrPartition.Code: true,
		kerr.RequestTimedOut.Code: true, kerr.InvalidPartitions.Code: true}
	const workers, ops = 4, 12
	errs := make(chan error, workers*ops)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range ops {
				name := fmt.Sprintf("race%d", rng.IntN(3))
				timeout := int32(0)
				if rng.IntN(2) == 0 {
					timeout = 60000
				}
				var code int16
				switch rng.IntN(3) {
				case 0:
					resp, err := createTopicsReq(timeout, false, map[string]int32{name: 1 + rng.Int32N(4)}).RequestWith(ctx, cl)
					if err != nil {
						errs <- err
						continue
					}
					code = resp.Topics[0].ErrorCode
				case 1:
					req := kmsg.NewPtrDeleteTopicsRequest()
					req.TimeoutMillis = timeout
					rt := kmsg.NewDeleteTopicsRequestTopic()
					rt.Topic = kmsg.StringPtr(name)
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, cl)
					if err != nil {
						errs <- err
						continue
					}
					code = resp.Topics[0].ErrorCode
				default:
					req := kmsg.NewPtrCreatePartitionsRequest()
					req.TimeoutMillis = timeout
					rt := kmsg.NewCreatePartitionsRequestTopic()
					rt.Topic, rt.Count = name, 5+rng.Int32N(3)
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, cl)
					if err != nil {
						errs <- err
						continue
					}
					code = resp.Topics[0].ErrorCode
				}
				if !allowed[code] {
					errs <- fmt.Errorf("%s: unexpected error code %d (%v)", name, code, kerr.ErrorForCode(code))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := b.topics.load()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tj := range m.Topics {
		if isInternalTopic(tj.Name) {
			continue
		}
		if tp, ok := b.topics.get(tj.Name); !ok || len(tp.parts) != int(tj.Partitions) {
			t.Errorf("%s: %d partitions in %s, registry disagrees", tj.Name, tj.Partitions, metaFile)
		}
		for p := range tj.Partitions {
			want = append(want, tj.Name+"-"+strconv.Itoa(int(p)))
		}
	}
	names, err := vfs.Default.List(logsDir(b.cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		if strings.HasPrefix(n, "race") {
			got = append(got, n)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("partition directories %v, want %v (from %s)", got, want, metaFile)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/mirror"
	"github.com/weirhq/weir/weirtest"
)

// TestMirrorCLISyncGroups: `weir mirror --sync-groups` commits, on the
// target, the translated offsets of the selected source groups while it
// copies (no cutover), counts them in its metrics, and leaves the other
// groups alone; a bad regex is refused.
func TestMirrorCLISyncGroups(t *testing.T) {
	src := weirtest.Start(t, weirtest.Topic("clicks", 2))
	kf, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	target := strings.Join(kf.ListenAddrs(), ",")
	cl := src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Two groups read 10 and 20 records of each partition on the source.
	adm := src.Admin()
	for g, at := range map[string]int64{"app.orders": 10, "other": 20} {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "clicks", Partition: 0, At: at, LeaderEpoch: -1})
		offs.Add(kadm.Offset{Topic: "clicks", Partition: 1, At: at, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, g, offs); err != nil {
			t.Fatal(err)
		}
	}
	p := startWeir(t, "mirror", "--source", src.Addr(), "--target", target, "--topics", "clicks",
		"--sync-groups", `app\..*`, "--sync-groups-interval", "100ms", "--metrics-addr", "127.0.0.1:0")
	waitStarted(t, p)
	waitMirrored(t, mirror.Config{Source: []string{src.Addr()}, Target: kf.ListenAddrs()}, 2)

	tgt := kadm.NewClient(newKgo(t, kf.ListenAddrs()))
	for {
		resp, err := tgt.FetchOffsetsForTopics(ctx, "app.orders", "clicks")
		if err == nil {
			o0, _ := resp.Lookup("clicks", 0)
			o1, _ := resp.Lookup("clicks", 1)
			if o0.At == 10 && o1.At == 10 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group app.orders not synced to the target: %v %v\nstderr: %s", resp, err, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	url := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(p.stdout.String(), "\n", 2)[0], "metrics on "))
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `weir_mirror_group_offsets_synced_total{group="app.orders",mirror="default"} 2`; !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %s:\n%s", want, body)
	}
	if strings.Contains(string(body), `group="other"`) {
		t.Errorf("group other (not selected) in the metrics:\n%s", body)
	}
	groups, err := tgt.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups["other"]; ok {
		t.Error("group other (not selected) exists on the target")
	}
	// mirror status --groups: app.orders synced at 10, other (not synced)
	// behind its translation 20 with no offset on the target.
	out := mustCLI(t, "", "mirror", "status", "--source", src.Addr(), "--target", target, "--groups", ".*")
	for _, want := range []string{
		"app.orders  clicks  0          10             clicks        10          10             synced  0",
		"app.orders  clicks  1          10             clicks        10          10             synced  0",
		"other       clicks  0          20             clicks        20          -              behind  0",
		"other       clicks  1          20             clicks        20          -              behind  0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("mirror status --groups lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "", "mirror", "status", "--source", src.Addr(), "--target", target, "--groups", "app.*", "-o", "json")
	if !strings.Contains(out, `"state": "synced"`) || strings.Contains(out, `"other"`) {
		t.Errorf("mirror status --groups app.* -o json:\n%s", out)
	}
	p.interrupt(t)

	_, errOut, code := runCLI(t, "", "mirror", "--source", src.Addr(), "--target", target, "--topics", "clicks", "--sync-groups", "(")
	if code == 0 || !strings.Contains(errOut, "group sync regex") {
		t.Errorf("mirror with a bad --sync-groups: exit %d, %s", code, errOut)
	}
}

func newKgo(t *testing.T, seeds []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

package registry

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirhq/weir/weirtest"
)

// populate registers two versions, sets a subject level and soft-deletes
// version 1: the state a restart must keep.
func populate(t *testing.T, cl *sr.Client) {
	t.Helper()
	ctx := ctxT(t)
	for _, s := range []string{avroV1, avroV2} {
		if _, err := cl.CreateSchema(ctx, "s", sr.Schema{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "s"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := cl.DeleteSchema(ctx, "s", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
}

// checkPopulated asserts the state populate left.
func checkPopulated(t *testing.T, cl *sr.Client) {
	t.Helper()
	ctx := ctxT(t)
	vs, err := cl.SubjectVersions(ctx, "s")
	if err != nil || len(vs) != 1 || vs[0] != 2 {
		t.Fatalf("live versions: %v %v, want [2]", vs, err)
	}
	all, err := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "s")
	if err != nil || len(all) != 2 {
		t.Fatalf("versions with deleted=true: %v %v, want [1 2]", all, err)
	}
	for id, want := range map[int]string{1: avroV1, 2: avroV2} {
		got, err := cl.SchemaByID(ctx, id)
		if err != nil || got.Schema != want {
			t.Fatalf("id %d: %+v %v", id, got, err)
		}
	}
	if res := cl.Compatibility(ctx, "s"); res[0].Err != nil || res[0].Level != sr.CompatFull {
		t.Fatalf("subject level: %+v, want FULL", res[0])
	}
	// The next schema still gets a fresh id.
	s, err := cl.CreateSchema(ctx, "t", sr.Schema{Schema: `{"type":"int"}`})
	if err != nil || s.ID != 3 {
		t.Fatalf("new schema after restart: %+v %v, want id 3", s, err)
	}
}

func TestStateSurvivesBrokerCrash(t *testing.T) {
	b := weirtest.Start(t, weirtest.WithMemStorage())
	tr := startRegistryOn(t, b, Config{})
	populate(t, tr.client)
	b.CrashRestart()
	tr.close()
	// A new registry replays the topic the crashed broker recovered.
	checkPopulated(t, startRegistryOn(t, b, Config{}).client)
}

func TestRunningRegistrySurvivesBrokerCrash(t *testing.T) {
	b := weirtest.Start(t, weirtest.WithMemStorage())
	tr := startRegistryOn(t, b, Config{})
	populate(t, tr.client)
	b.CrashRestart()
	// The same registry keeps serving and writing once the broker is back.
	checkPopulated(t, tr.client)
}

// TestTwoRegistriesOneTopic runs two registries on one cluster: each takes
// over as writer when it writes, and both end with the same state.
func TestTwoRegistriesOneTopic(t *testing.T) {
	b := weirtest.Start(t)
	a := startRegistryOn(t, b, Config{})
	c := startRegistryOn(t, b, Config{}) // fences a's producer
	ctx := ctxT(t)
	s1, err := a.client.CreateSchema(ctx, "s", sr.Schema{Schema: avroV1})
	if err != nil || s1.ID != 1 {
		t.Fatalf("write through the fenced registry: %+v %v", s1, err)
	}
	// c has not written since a took over: its check must see a's version.
	if _, err := c.client.CreateSchema(ctx, "s", sr.Schema{Schema: avroBad}); srCode(err) != CodeIncompatibleSchema {
		t.Fatalf("c checked against a stale state: %v, want 409", err)
	}
	s2, err := c.client.CreateSchema(ctx, "s", sr.Schema{Schema: avroV2})
	if err != nil || s2.ID != 2 || s2.Version != 2 {
		t.Fatalf("second registry: %+v %v", s2, err)
	}
	s3, err := a.client.CreateSchema(ctx, "other", sr.Schema{Schema: avroV2})
	if err != nil || s3.ID != 2 {
		t.Fatalf("same schema through the first registry: %+v %v, want id 2", s3, err)
	}
}

// TestConcurrentRegistration registers one schema from many clients
// through two registries at once: one id, one version.
func TestConcurrentRegistration(t *testing.T) {
	b := weirtest.Start(t)
	regs := []*testRegistry{startRegistryOn(t, b, Config{}), startRegistryOn(t, b, Config{})}
	ctx := ctxT(t)
	const clients = 16
	ids := make([]int, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := regs[i%2].client.CreateSchema(ctx, "s", sr.Schema{Schema: avroV1})
			ids[i], errs[i] = s.ID, err
		}()
	}
	wg.Wait()
	for i := range clients {
		if errs[i] != nil || ids[i] != 1 {
			t.Fatalf("client %d: id %d err %v, want id 1", i, ids[i], errs[i])
		}
	}
	for _, r := range regs {
		vs, err := r.client.SubjectVersions(ctx, "s")
		if err != nil || fmt.Sprint(vs) != "[1]" {
			t.Fatalf("versions: %v %v, want [1]", vs, err)
		}
	}
}

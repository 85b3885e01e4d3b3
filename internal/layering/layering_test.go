package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/weirhq/weir"

// pkg is one package of `go list -deps -json`: its path, whether it belongs
// to this module, and every package its non-test code depends on
// (transitively).
type pkg struct {
	ImportPath string
	Deps       []string
	Module     *struct{ Path string }
}

// rule forbids packages matching from to depend on packages matching to.
type rule struct {
	name     string
	from, to func(path string) bool
}

// under reports whether path is the module package rel or below it.
func under(rel string) func(string) bool {
	p := module + "/" + rel
	return func(path string) bool { return path == p || strings.HasPrefix(path, p+"/") }
}

func exactly(paths ...string) func(string) bool {
	return func(path string) bool {
		for _, p := range paths {
			if path == p {
				return true
			}
		}
		return false
	}
}

func anyOf(fs ...func(string) bool) func(string) bool {
	return func(path string) bool {
		for _, f := range fs {
			if f(path) {
				return true
			}
		}
		return false
	}
}

func not(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }

// protocol are the packages that speak or model the Kafka protocol.
var protocol = anyOf(
	exactly(
		"github.com/twmb/franz-go/pkg/kmsg",
		"github.com/twmb/franz-go/pkg/kgo",
		"github.com/twmb/franz-go/pkg/kadm",
		"github.com/twmb/franz-go/pkg/kerr",
		"github.com/twmb/franz-go/pkg/kbin",
		module+"/broker",
		module+"/broker/group",
		module+"/broker/txn",
	),
)

var rules = []rule{
	{"storage knows nothing of the protocol", anyOf(exactly(module+"/broker/log"), under("vfs")), protocol},
	{"stream never depends on the broker", under("stream"), under("broker")},
	{"mirror speaks only the Kafka protocol (any cluster), never weir's broker", under("mirror"), under("broker")},
	{"nothing in the product depends on examples/", not(under("examples")), under("examples")},
}

// violations lists, sorted, every (package, dependency) pair of pkgs that a
// rule forbids. Only the module's own packages are checked.
func violations(pkgs []pkg, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		for _, r := range rules {
			if !r.from(p.ImportPath) {
				continue
			}
			for _, d := range p.Deps {
				if r.to(d) {
					out = append(out, fmt.Sprintf("%s: %s depends on %s", r.name, p.ImportPath, d))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// listModule runs `go list -deps -json` over the whole module.
func listModule(t *testing.T) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering test needs the go command: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Deps,Module", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayering fails on every forbidden dependency in the module.
func TestLayering(t *testing.T) {
	pkgs := listModule(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
	}
	// The rules must have something to check: a renamed package would make
	// them pass vacuously.
	for _, want := range []string{"broker/log", "vfs", "stream", "mirror", "cmd/weir", "examples/surge/cmd", "internal/demo/surge"} {
		if !seen[module+"/"+want] {
			t.Fatalf("go list did not report %s/%s: update the rules to the new layout", module, want)
		}
	}
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
}

// TestLayeringRulesFail checks that each rule reports what it forbids (and
// only that) on a made-up module graph.
func TestLayeringRulesFail(t *testing.T) {
	own := &struct{ Path string }{module}
	m := func(rel string) string { return module + "/" + rel }
	pkgs := []pkg{
		{ImportPath: m("broker/log"), Module: own, Deps: []string{m("vfs"), "github.com/twmb/franz-go/pkg/kmsg"}},
		{ImportPath: m("vfs/errorfs"), Module: own, Deps: []string{m("vfs"), m("broker/group")}},
		{ImportPath: m("stream/internal/state"), Module: own, Deps: []string{m("broker/internal/recbatch"), "github.com/twmb/franz-go/pkg/kgo"}},
		{ImportPath: m("cmd/weir"), Module: own, Deps: []string{m("broker"), m("examples/surge")}},
		{ImportPath: m("examples/surge/cmd"), Module: own, Deps: []string{m("examples/surge"), m("internal/demo/surge")}},
		{ImportPath: m("broker"), Module: own, Deps: []string{"github.com/twmb/franz-go/pkg/kmsg", m("broker/log")}},
		{ImportPath: "github.com/other/examples/x", Deps: []string{"github.com/weirhq/weir/examples/surge"}},
	}
	got := violations(pkgs, rules)
	want := []string{
		"nothing in the product depends on examples/: " + m("cmd/weir") + " depends on " + m("examples/surge"),
		"storage knows nothing of the protocol: " + m("broker/log") + " depends on github.com/twmb/franz-go/pkg/kmsg",
		"storage knows nothing of the protocol: " + m("vfs/errorfs") + " depends on " + m("broker/group"),
		"stream never depends on the broker: " + m("stream/internal/state") + " depends on " + m("broker/internal/recbatch"),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

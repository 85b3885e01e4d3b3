package broker

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata golden files from the current code")

// The advertised API set is part of the broker's contract: a client picks
// its request versions from it, so a range may only change on purpose
// (a handler that implements a new version, or drops one). This test pins
// the whole ApiVersions key list; after an intended change, rerun with
// -update and review the diff of testdata/apiversions.golden.
func TestApiVersionsGolden(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
	resp := c.roundTrip(req, 1).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	var sb strings.Builder
	sb.WriteString("# key name min max: the ApiVersions list this broker advertises (TestApiVersionsGolden)\n")
	for _, k := range resp.ApiKeys {
		fmt.Fprintf(&sb, "%d %s %d %d\n", k.ApiKey, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
	}
	got := sb.String()
	path := filepath.Join("testdata", "apiversions.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("advertised API versions changed:\n--- got\n%s--- want (%s)\n%s", got, path, want)
	}
}

// conn.go treats every API alike: what a connection does differently for
// an API is a field of the API's registration (apis.go). This fails when
// conn.go names a concrete request or response type or an API key.
func TestConnNamesNoAPI(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "conn.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	generic := map[string]bool{"Request": true, "Response": true, "RequestForKey": true, "NameForKey": true, "SkipTags": true}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "kmsg" && !generic[sel.Sel.Name] {
			t.Errorf("conn.go names kmsg.%s: make it a property of the API's registration", sel.Sel.Name)
		}
		return true
	})
}

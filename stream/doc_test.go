package stream

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameNoUnexported: the package doc and the docs of exported
// declarations are for users, who cannot see unexported code: they must not
// send a reader to an unexported method or field (as "see task.observe" did,
// issue 16 defect 5). A reference is "<type>.<member>" with <type> an
// unexported type of the package.
func TestDocsNameNoUnexported(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	files := []*ast.File{}
	for _, f := range pkgs["stream"].Files {
		files = append(files, f)
	}
	unexported := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if name := s.(*ast.TypeSpec).Name.Name; !ast.IsExported(name) {
						unexported[name] = true
					}
				}
			}
		}
	}
	// After the unexported types are collected: doc drops them from the files.
	p, err := doc.NewFromFiles(fset, files, "github.com/weirhq/weir/stream")
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\b([a-z][A-Za-z0-9]*)\.([A-Za-z][A-Za-z0-9]*)\b`)
	check := func(where, text string) {
		for _, m := range ref.FindAllStringSubmatch(text, -1) {
			if unexported[m[1]] {
				t.Errorf("%s names %s.%s, of the unexported type %s", where, m[1], m[2], m[1])
			}
		}
	}
	check("the package doc", p.Doc)
	for _, ty := range p.Types {
		check("type "+ty.Name, ty.Doc)
		for _, f := range ty.Funcs {
			check("func "+f.Name, f.Doc)
		}
		for _, m := range ty.Methods {
			check("method "+ty.Name+"."+m.Name, m.Doc)
		}
	}
	for _, f := range p.Funcs {
		check("func "+f.Name, f.Doc)
	}
}

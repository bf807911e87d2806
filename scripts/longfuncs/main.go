// Command longfuncs lists the functions of the repository's Go code (tests
// left out) longer than -min lines, longest first: the candidates for a
// split where a reader wants names for the parts.
//
//	go run ./scripts/longfuncs [-min 100] [DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	minLines := flag.Int("min", 100, "report functions longer than this many lines")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	type fn struct {
		where string
		name  string
		lines int
	}
	var out []fn
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				t := fd.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if id, ok := t.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			if n := end.Line - start.Line + 1; n > *minLines {
				out = append(out, fn{fmt.Sprintf("%s:%d", p, start.Line), name, n})
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "longfuncs:", err)
		os.Exit(2)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	for _, f := range out {
		fmt.Printf("%4d  %-28s %s\n", f.lines, f.name, f.where)
	}
}

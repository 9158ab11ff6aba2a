// Package codesize holds the project's size limits (issue 36) as a test:
// no function over 120 lines and no file over 600 lines of non-test Go
// anywhere in the repository (bench included), and no package under
// regional/ over 2,500. What is over today is listed with the step of issue
// 36 that brings it under; an entry no longer over fails too, so the lists
// only shrink.
package codesize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	maxFunc    = 120
	maxFile    = 600
	maxPackage = 2500 // regional packages
)

// overFiles and overPackages are what is over its limit today (paths from
// the repository's root), each with what takes it under.
var (
	overFiles    = map[string]string{}
	overPackages = map[string]string{}
)

// root is the repository's root: a test runs in its package's directory,
// internal/codesize.
func root(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod two directories above the test: %v", err)
	}
	return dir
}

func TestNothingOutgrowsItsLimits(t *testing.T) {
	top := root(t)
	fset := token.NewFileSet()
	files, pkgs := map[string]int{}, map[string]int{}
	var long []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "testdata") && p != top {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(top, p)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lines := fset.File(f.Pos()).LineCount()
		files[rel] = lines
		if dir := filepath.ToSlash(filepath.Dir(rel)); strings.HasPrefix(dir, "regional/") {
			pkgs[dir] += lines
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body = fn.Body
			case *ast.FuncLit:
				body = fn.Body
			}
			if body != nil {
				if l := fset.Position(body.End()).Line - fset.Position(n.Pos()).Line + 1; l > maxFunc {
					long = append(long, fset.Position(n.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read only %d files under %s", len(files), top)
	}
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("a function over %d lines at %s", maxFunc, strings.TrimPrefix(l, top+"/"))
	}
	check := func(what string, sizes map[string]int, limit int, known map[string]string) {
		for name, n := range sizes {
			if _, ok := known[name]; n > limit && !ok {
				t.Errorf("%s %s has %d lines of non-test Go, over %d", what, name, n, limit)
			}
		}
		for name := range known {
			if sizes[name] <= limit {
				t.Errorf("%s %s is listed as over %d but has %d lines: take it off the list", what, name, limit, sizes[name])
			}
		}
	}
	check("file", files, maxFile, overFiles)
	check("package", pkgs, maxPackage, overPackages)
}

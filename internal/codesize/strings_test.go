package codesize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// stringRunBudget is how many non-test functions under regional/ (function
// literals included) may take three or more adjacent string parameters
// (issue 36): project, campaign and member side by side are given in the
// wrong order without a compiler noticing, where a typed reference
// (loyalty.CardRef, campaigns.ItemRef, …) cannot be. 53 on 2026-11-28 at
// the start of session 32. The count must not grow; when it falls, lower
// the budget to it, so it only shrinks.
const stringRunBudget = 19

// stringRun is the longest run of adjacent string parameters in ft.
func stringRun(ft *ast.FuncType) int {
	run, best := 0, 0
	for _, f := range ft.Params.List {
		if id, ok := f.Type.(*ast.Ident); ok && id.Name == "string" {
			run += max(len(f.Names), 1)
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

func TestFewFunctionsTakeThreeAdjacentStrings(t *testing.T) {
	top := root(t)
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(filepath.Join(top, "regional"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var ft *ast.FuncType
			name := "a function literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				ft, name = fn.Type, fn.Name.Name
			case *ast.FuncLit:
				ft = fn.Type
			}
			if ft != nil && stringRun(ft) >= 3 {
				pos := fset.Position(n.Pos())
				rel, _ := filepath.Rel(top, pos.Filename)
				found = append(found, fmt.Sprintf("%s:%d %s", filepath.ToSlash(rel), pos.Line, name))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	switch n := len(found); {
	case n > stringRunBudget:
		t.Errorf("%d functions under regional/ take three or more adjacent strings, over the budget of %d: "+
			"pass a typed reference (loyalty.CardRef, campaigns.ItemRef, …) instead:\n%s",
			n, stringRunBudget, strings.Join(found, "\n"))
	case n < stringRunBudget:
		t.Errorf("%d functions under regional/ take three or more adjacent strings, under the budget of %d: lower stringRunBudget to %d",
			n, stringRunBudget, n)
	}
}

// TestStringRunCountsAdjacentStringsOnly keeps the count's rule: a run is
// broken by any parameter of another type.
func TestStringRunCountsAdjacentStringsOnly(t *testing.T) {
	for src, want := range map[string]int{
		"func(ctx context.Context, projectID, campaignID, memberID string)":  3,
		"func(projectID string, campaignID string, memberID string) error":   3,
		"func(projectID, campaignID string, n int, memberID string)":         2,
		"func(ref CardRef, a, b string, c *string)":                          2,
		"func(a []string, b, c string, d ...string)":                         2,
		"func(projectID, resourceType, parentID, more string, b *pgx.Batch)": 4,
	} {
		e, err := parser.ParseExpr(src + " {}")
		if err != nil {
			t.Fatal(err)
		}
		if got := stringRun(e.(*ast.FuncLit).Type); got != want {
			t.Errorf("%s: a run of %d, want %d", src, got, want)
		}
	}
}

package api

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A request forwarded to another node carries only the query arguments
// QueryArgs names: every argument a handler reads must be there.
func TestQueryArgsNameEveryArgumentAHandlerReads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`\b(?:arg|intArg|timeArg)\("([A-Za-z_]+)"`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllSubmatch(src, -1) {
			found++
			if name := string(m[1]); !slices.Contains(QueryArgs, name) {
				t.Errorf("%s reads query argument %q, which QueryArgs lacks", f, name)
			}
		}
	}
	if found < len(QueryArgs) {
		t.Fatalf("found %d reads of query arguments, fewer than QueryArgs names", found)
	}
}

func TestArgsCarriesTheArgumentsThatAreSet(t *testing.T) {
	q := map[string]string{"limit": "5", "labels": "a:b", "unknown": "x"}
	r := &Request{Query: ArgsMap(q)}
	got := r.Args()
	if len(got) != 2 || got["limit"] != "5" || got["labels"] != "a:b" {
		t.Fatalf("Args() = %v, want limit and labels only", got)
	}
}

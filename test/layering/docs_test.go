package layering

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// architecture is the page whose package tables must name every package.
const architecture = "../../docs/architecture.md"

// packageRow is a row of a package table: its first cell names one package.
var packageRow = regexp.MustCompile("^\\| `([a-z0-9_./-]+)` \\|")

// tablePackages returns the packages the `| package | role |` tables of
// md name, with a problem for each row that does not name exactly one.
func tablePackages(md string) (names map[string]int, problems []string) {
	names = map[string]int{}
	in := false
	for i, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "| package | role |"):
			in = true
		case !strings.HasPrefix(line, "|"):
			in = false
		case !in || strings.HasPrefix(line, "|---"):
		default:
			m := packageRow.FindStringSubmatch(line)
			if m == nil {
				problems = append(problems, fmt.Sprintf("line %d: a row of a package table names one package, in backquotes: %s", i+1, line))
				continue
			}
			names[m[1]]++
		}
	}
	return names, problems
}

// TestArchitectureNamesEveryPackage: docs/architecture.md's package tables
// have a row for every package of the module, once, and none for a package
// that is gone.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	pkgs := packages(t)
	b, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	names, problems := tablePackages(string(b))
	for _, p := range problems {
		t.Errorf("docs/architecture.md %s", p)
	}
	if len(names) == 0 {
		t.Fatal("docs/architecture.md has no `| package | role |` table")
	}
	for _, p := range sorted(pkgs) {
		if names[p] == 0 {
			t.Errorf("docs/architecture.md's package tables do not name %s: add a row (what it is for)", p)
		}
	}
	for n, c := range names {
		if _, ok := pkgs[n]; !ok {
			t.Errorf("docs/architecture.md's package tables name %s, which `go list ./...` does not list: remove or rename its row", n)
		}
		if c > 1 {
			t.Errorf("docs/architecture.md's package tables name %s %d times", n, c)
		}
	}
}

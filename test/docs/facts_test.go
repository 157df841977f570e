package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/segchain/segchain/examples"
	"github.com/segchain/segchain/internal/config"
)

// TestDocFacts checks the facts the manual states about the program against
// the program: the default lab's node count, the node-name rule and the
// list of roles.
func TestDocFacts(t *testing.T) {
	read := func(f string) string {
		b, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	d, err := config.Parse(examples.Default, "../../examples")
	if err != nil {
		t.Fatal(err)
	}
	lab := read("docs/lab.md")
	m := regexp.MustCompile(`Figure 3\.1 network, (\d+) nodes`).FindStringSubmatch(lab)
	if m == nil {
		t.Fatal(`docs/lab.md does not say how many nodes the default lab has ("Figure 3.1 network, N nodes")`)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(d.Nodes) {
		t.Errorf("docs/lab.md: the default lab has %d nodes, not %d", len(d.Nodes), n)
	}
	// The count in words too ("the nine-node default"), on every page.
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	pages := []string{"README.md"}
	for _, p := range mustGlob(t, "../../docs/*.md") {
		pages = append(pages, strings.TrimPrefix(p, "../../"))
	}
	countRE := regexp.MustCompile(`(?i)\b(\w+)-node default\b`)
	for _, p := range pages {
		for _, m := range countRE.FindAllStringSubmatch(read(p), -1) {
			if i := slices.Index(words, strings.ToLower(m[1])); i < 0 || i != len(d.Nodes) {
				t.Errorf("%s: %q, but the default lab has %d nodes", p, m[0], len(d.Nodes))
			}
		}
	}
	for name := range d.Nodes {
		if !strings.Contains(lab, name) {
			t.Errorf("docs/lab.md does not name the default lab's node %s", name)
		}
	}
	const nodeRule = "`[a-z0-9-]{1,10}`"
	if !strings.Contains(lab, "Node names are "+nodeRule) {
		t.Errorf("docs/lab.md: node names are %s", nodeRule)
	}
	cfg := read("docs/config.md")
	roles := "role one of " + strings.Join(config.Roles, ", ") + ";"
	if !strings.Contains(cfg, roles) {
		t.Errorf("docs/config.md: want %q", roles)
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v (%d files)", pattern, err, len(m))
	}
	return m
}

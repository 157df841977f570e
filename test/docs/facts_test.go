package docs

import (
	"os"
	"regexp"
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

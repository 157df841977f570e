package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/segchain/segchain/"

// intent are the packages that must stay pure data: the domain, the plan,
// the controller, the agent protocol and the service kinds' intent halves.
// A remote agent is built on them; none may link eBPF or netlink.
var intent = []string{
	"internal/config",
	"internal/plan",
	"internal/controller",
	"internal/agent",
	"internal/nodestate",
	"internal/journal",
	"internal/service",
	"internal/service/kinds",
	"internal/service/srunaware",
	"internal/service/firewall",
}

// kernel are the modules only the agent implementation and the data path
// below it may link.
var kernel = []string{"github.com/cilium/ebpf", "github.com/vishvananda/netlink", "github.com/vishvananda/netns"}

// layers: a package of a layer may import packages of its own layer or of
// layers after it, never of a layer before it. The data path sits below the
// agent implementation (which drives it) and may use the agent protocol's
// plain-data types; the intent packages never reach the implementation.
var layers = [][]string{
	{"cmd/segchain"},
	{"internal/controller", "internal/lab"},
	{"internal/plan"},
	{"internal/config"},
	{"internal/nodeagent"},
	{"internal/proxy", "internal/fw", "internal/boundary", "internal/dataplane", "internal/localsid", "internal/bpfpin"},
	{"internal/agent", "internal/journal"},
	{"internal/service/kinds"},
	{"internal/service/srunaware", "internal/service/firewall"},
	{"internal/service"},
	{"internal/nodestate"},
}

// deps returns the transitive dependencies of pkg (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func TestIntentLinksNoKernelModule(t *testing.T) {
	for _, p := range intent {
		t.Run(p, func(t *testing.T) {
			for _, d := range deps(t, "../../"+p) {
				for _, k := range kernel {
					if d == k || strings.HasPrefix(d, k+"/") {
						t.Errorf("%s links %s (an intent package must stay pure data; move the kernel code to the kind's data-path package or to internal/nodeagent)", p, d)
					}
				}
			}
		})
	}
}

func TestLayered(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layerOf[mod+p] = i
		}
	}
	for i, l := range layers {
		for _, p := range l {
			t.Run(p, func(t *testing.T) {
				for _, d := range deps(t, "../../"+p) {
					if j, ok := layerOf[d]; ok && j < i {
						t.Errorf("%s (layer %d) depends on %s (layer %d, above it)", p, i, strings.TrimPrefix(d, mod), j)
					}
				}
			})
		}
	}
}

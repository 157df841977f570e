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
	"internal/chainpath",
	"internal/agent/reconcile",
	"internal/agent",
	"internal/nodestate",
	"internal/journal",
	"internal/service",
	"internal/service/kinds",
	"internal/service/srunaware",
	"internal/service/firewall",
	"internal/service/userspace",
}

// kernel are the modules only the agent implementation and the data path
// below it may link.
var kernel = []string{"github.com/cilium/ebpf", "github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/osrg/gobgp"}

// layers: a package of a layer may import packages of its own layer or of
// layers after it, never of a layer before it. The data path sits below the
// agent implementation (which drives it) and may use the agent protocol's
// plain-data types; the intent packages never reach the implementation.
var layers = [][]string{
	{"cmd/segchain"},
	{"internal/session"},
	{"internal/agent/reconcile"},
	{"internal/controller", "internal/lab"},
	{"internal/chainpath"},
	{"internal/plan"},
	{"internal/config"},
	{"internal/agent/local"},
	{"internal/dataplane/srunaware", "internal/dataplane/firewall", "internal/dataplane/userspace", "pkg/srv6svc", "internal/boundary", "internal/dataplane", "internal/localsid", "internal/bpfpin", "internal/bgp", "internal/frr"},
	{"internal/agent", "internal/journal"},
	{"internal/service/kinds"},
	{"internal/service/srunaware", "internal/service/firewall", "internal/service/userspace"},
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
						t.Errorf("%s links %s (an intent package must stay pure data; move the kernel code to the kind's data-path package or to internal/agent/local)", p, d)
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

// kindImporters are the only packages (tests aside) that may import a
// service kind's own package: the registration list, the kind's data path
// (its node half), and config, which declares the two first kinds' YAML
// fields for compatibility. Everybody else iterates the registry
// (internal/service/kinds, internal/agent/local/kinds.go).
var kindImporters = map[string][]string{
	"internal/service/srunaware": {"internal/service/kinds", "internal/dataplane/srunaware", "internal/config"},
	"internal/service/firewall":  {"internal/service/kinds", "internal/dataplane/firewall", "internal/config"},
	"internal/service/userspace": {"internal/service/kinds", "internal/dataplane/userspace"},
}

func TestKindsReachedThroughTheRegistry(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		for _, imp := range f[1:] {
			allowed, isKind := kindImporters[strings.TrimPrefix(imp, mod)]
			if !isKind || pkg == strings.TrimPrefix(imp, mod) {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == pkg
			}
			if !ok {
				t.Errorf("%s imports the service kind %s: iterate the registry (internal/service/kinds) instead", pkg, strings.TrimPrefix(imp, mod))
			}
		}
	}
}

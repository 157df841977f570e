package layering

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
)

const mod = "github.com/segchain/segchain/"

// The layers, top first: a package may import packages of its own layer
// or of layers below it, never of a layer above. Adding a layer is one
// line here (where it belongs in the order); its packages then name it in
// layerOf.
const (
	top           = iota // commands, example services, test packages: nothing imports them
	tools                // wire or measure what is below: the agent daemon, benchmarks, test harnesses
	sessions             // the apply session: plan, agents, journals, locks, leases of one command
	reconciler           // the agent's reconcile loop: the controller's logic for one node
	orchestration        // the controller and the lab: drive agents, local or remote
	chainpaths           // a chain's path through the nodes' tables (pure)
	plans                // domain → desired state per node (pure)
	configs              // the domain file (pure)
	agents               // the agent implementations: in-namespace, over gRPC, its metrics
	datapath             // kernel state: netlink, eBPF programs and pins, BGP/FRR, userspace services
	protocol             // the agent protocol and the undo journal (pure)
	kindList             // the service kinds' registration list
	kinds                // the service kinds' intent halves
	seam                 // the service-kind seam
	state                // the state model every layer shares
	leaves               // self-contained libraries: codecs, arithmetic, helpers
)

// layerOf is the map of the module: every package `go list ./...` lists
// has one line here, and TestEveryPackageHasALayer fails on a package
// without one (or a line whose package is gone). A new package is one line.
var layerOf = map[string]int{
	"cmd/segchain":                 top,
	"cmd/segchain-agent":           top,
	"cmd/bpfconst":                 top,
	"examples/services/compress":   top,
	"examples/services/counter":    top,
	"examples/services/decrypt":    top,
	"examples/services/encrypt":    top,
	"examples/services/ids":        top,
	"examples/services/portfilter": top,
	"test/agents":                  top,
	"test/apply":                   top,
	"test/bgp":                     top,
	"test/docs":                    top,
	"test/e2e":                     top,
	"test/fuzz":                    top,
	"test/fw":                      top,
	"test/layering":                top,
	"test/native":                  top,
	"test/oam":                     top,
	"test/pools":                   top,
	"test/usid":                    top,
	"test/netfilter":               top,
	"test/proxy":                   top,
	"test/skipcheck":               top,
	"test/userspace":               top,

	"internal/agent/daemon":                  tools,
	"internal/cpbench":                       tools,
	"internal/boundary/boundaryperf":         tools,
	"internal/dataplane/firewall/fwperf":     tools,
	"internal/dataplane/netfilter/nfperf":    tools,
	"internal/dataplane/srunaware/proxyperf": tools,
	"internal/pool/poolperf":                 tools,
	"internal/oam/oamperf":                   tools,
	"internal/dataplane/userspace/usvcperf":  tools,
	"internal/testutil":                      tools,
	"internal/svctest":                       tools,
	"internal/oam":                           tools,
	"internal/oam/oamsvc":                    tools,

	"internal/session":         sessions,
	"internal/testutil/labenv": tools,

	"internal/agent/reconcile": reconciler,

	"internal/controller": orchestration,
	"internal/lab":        orchestration,

	"internal/chainpath": chainpaths,
	"internal/plan":      plans,
	"internal/config":    configs,

	"internal/agent/local":      agents,
	"internal/agent/rpc":        agents,
	"internal/agent/rpc/client": agents,
	"internal/agent/rpc/server": agents,
	"internal/agent/agenttest":  agents,
	"internal/metrics":          agents,

	"internal/dataplane":           datapath,
	"internal/dataplane/firewall":  datapath,
	"internal/dataplane/netfilter": datapath,
	"internal/dataplane/srunaware": datapath,
	"internal/dataplane/userspace": datapath,
	"internal/pool/datapath":       datapath,
	"internal/health":              datapath,
	"internal/boundary":            datapath,
	"internal/localsid":            datapath,
	"internal/bpfpin":              datapath,
	"internal/bgp":                 datapath,
	"internal/frr":                 datapath,
	"internal/perf":                datapath,
	"internal/perf/perftest":       tools,
	"internal/dump":                datapath,
	"internal/ids":                 datapath,
	"pkg/srv6svc":                  datapath,
	"pkg/srv6svc/svcflags":         datapath,
	"pkg/srv6svc/srv6svctest":      datapath,
	"examples/services/crypt":      datapath,

	"internal/agent":   protocol,
	"internal/journal": protocol,

	"internal/service/kinds": kindList,

	"internal/service/firewall":  kinds,
	"internal/service/netfilter": kinds,
	"internal/service/srunaware": kinds,
	"internal/service/userspace": kinds,
	"internal/pool":              kinds,

	"internal/service": seam,

	"internal/nodestate": state,

	"internal/srh":                 leaves,
	"internal/sid":                 leaves,
	"internal/csid":                leaves,
	"internal/fwrule":              leaves,
	"internal/nsutil":              leaves,
	"internal/nodelock":            leaves,
	"internal/bfd":                 leaves,
	"internal/pki":                 leaves,
	"internal/bpfconst":            leaves,
	"internal/devprofile":          leaves,
	"internal/inheritfd":           leaves,
	"internal/agent/rpc/agentpb":   leaves,
	"internal/oam/oampb":           leaves,
	"pkg/srv6svc/internal/offline": leaves,
	"examples":                     leaves,
}

// intent are the packages that must stay pure data: the domain, the plan,
// the controller, the agent protocol and (below, by rule) every package
// under internal/service. A remote agent is built on them; none may link
// eBPF or netlink.
var intent = []string{
	"internal/config",
	"internal/plan",
	"internal/controller",
	"internal/chainpath",
	"internal/agent/reconcile",
	"internal/agent",
	"internal/agent/rpc",
	"internal/agent/rpc/agentpb",
	"internal/agent/rpc/client",
	"internal/agent/agenttest",
	"internal/nodestate",
	"internal/journal",
}

// kernel are the modules only the agent implementation and the data path
// below it may link.
var kernel = []string{"github.com/cilium/ebpf", "github.com/vishvananda/netlink", "github.com/vishvananda/netns", "github.com/osrg/gobgp"}

// service is the root of the service kinds: internal/service/<kind> is a
// kind's intent half (pure), internal/dataplane/<kind> its node half.
const service = "internal/service"

// configKinds are the kinds whose YAML fields config declares itself (the
// two first kinds', kept for compatibility).
var configKinds = []string{"srunaware", "firewall"}

// pkgInfo is one package of the module: its imports and its transitive
// dependencies (tests aside), module prefix trimmed from ours.
type pkgInfo struct {
	imports, deps []string
}

var (
	listOnce sync.Once
	listed   map[string]pkgInfo
	listErr  error
)

// packages lists the module's packages with one `go list -deps` run.
func packages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				err = &listError{err, string(ee.Stderr)}
			}
			listErr = err
			return
		}
		listed = map[string]pkgInfo{}
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 3 {
				listErr = fmt.Errorf("unexpected line %q", line)
				return
			}
			trim := func(s string) []string {
				var r []string
				for _, p := range strings.Fields(s) {
					r = append(r, strings.TrimPrefix(p, mod))
				}
				return r
			}
			listed[strings.TrimPrefix(f[0], mod)] = pkgInfo{imports: trim(f[1]), deps: trim(f[2])}
		}
	})
	if listErr != nil {
		t.Fatalf("go list ./...: %v", listErr)
	}
	return listed
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + "\n" + e.stderr }

func sorted(m map[string]pkgInfo) []string {
	var ps []string
	for p := range m {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// kindOf returns the kind's name when p is a service kind's intent half
// (internal/service/<kind>, the registration list aside).
func kindOf(p string) (string, bool) {
	k, ok := strings.CutPrefix(p, service+"/")
	if !ok || k == "kinds" || strings.Contains(k, "/") {
		return "", false
	}
	return k, true
}

func TestEveryPackageHasALayer(t *testing.T) {
	pkgs := packages(t)
	for _, p := range sorted(pkgs) {
		if _, ok := layerOf[p]; !ok {
			t.Errorf("package %s has no layer: add a line for it to layerOf in test/layering/layering_test.go (and a row to the package table of docs/architecture.md)", p)
		}
	}
	for p := range layerOf {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("layerOf names %s, which `go list ./...` does not list: remove its line", p)
		}
	}
	for _, p := range intent {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("intent names %s, which `go list ./...` does not list", p)
		}
	}
}

func TestIntentLinksNoKernelModule(t *testing.T) {
	pkgs := packages(t)
	pure := append([]string(nil), intent...)
	for _, p := range sorted(pkgs) {
		if p == service || strings.HasPrefix(p, service+"/") {
			pure = append(pure, p)
		}
	}
	for _, p := range pure {
		t.Run(p, func(t *testing.T) {
			for _, k := range kernel {
				for _, d := range pkgs[p].deps {
					if d == k || strings.HasPrefix(d, k+"/") {
						t.Errorf("%s links %s (an intent package must stay pure data; move the kernel code to the kind's data-path package or to internal/agent/local)", p, d)
						break // one line a module
					}
				}
			}
		})
	}
}

func TestLayered(t *testing.T) {
	pkgs := packages(t)
	for _, p := range sorted(pkgs) {
		i, ok := layerOf[p]
		if !ok {
			continue // TestEveryPackageHasALayer says so
		}
		for _, d := range pkgs[p].deps {
			if j, ok := layerOf[d]; ok && j < i {
				t.Errorf("%s (layer %d) depends on %s (layer %d, above it)", p, i, d, j)
			}
		}
	}
}

// TestKindsReachedThroughTheRegistry: a service kind's intent half
// (internal/service/<kind>) is imported (tests aside) only by the
// registration list (internal/service/kinds), the kind's node half
// (internal/dataplane/<kind>) and, for configKinds, config. Everybody else
// iterates the registry (internal/service/kinds,
// internal/agent/local/kinds.go).
func TestKindsReachedThroughTheRegistry(t *testing.T) {
	pkgs := packages(t)
	for _, p := range sorted(pkgs) {
		for _, imp := range pkgs[p].imports {
			k, isKind := kindOf(imp)
			if !isKind || p == imp {
				continue
			}
			ok := p == service+"/kinds" || p == "internal/dataplane/"+k
			for _, c := range configKinds {
				ok = ok || (p == "internal/config" && c == k)
			}
			if !ok {
				t.Errorf("%s imports the service kind %s: iterate the registry (internal/service/kinds) instead", p, imp)
			}
		}
	}
}

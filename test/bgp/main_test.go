// Package bgp runs routing: bgp domains in labs: GoBGP speakers in the
// segchain agents, FRR on the routers, chains over BGP-learned routes,
// failover when a link loses carrier, and bad input.
package bgp

import (
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

const domainFile = "../../examples/redundant.yaml"

// env is a bgp domain's lab: an agent per node and FRR on the routers
// (labenv: cleaned up and checked for leftover agents, FRR daemons,
// namespaces and pins at the end).
type env struct{ *labenv.Env }

// newEnv brings up file's lab under a unique name (h19-...).
func newEnv(t *testing.T, file string) *env { return newEnvPrefix(t, file, true, "h19-") }

// newEnvArgs is newEnv; bgp says the file is a bgp domain (FRR expected
// when it has routers), otherwise the lab gets --agents explicitly.
func newEnvArgs(t *testing.T, file string, bgp bool) *env { return newEnvPrefix(t, file, bgp, "h19-") }

// newEnvPrefix is newEnvArgs with the lab named prefix + a random suffix.
func newEnvPrefix(t *testing.T, file string, bgp bool, prefix string) *env {
	return &env{labenv.New(t, labenv.Options{File: file, Prefix: prefix, CLI: true, Binary: segchainBin, BGP: bgp, Agents: true})}
}

// hop is one next hop of a route as `ip -j route` prints it.
type hop struct {
	Gateway string `json:"gateway"`
	Dev     string `json:"dev"`
}

// bgpRoutes reads node's routes of protocol 199 (the speaker's) with
// iproute2, an oracle segchain did not write: destination → next-hop
// devices, sorted.
func (e *env) bgpRoutes(node string) map[string][]string {
	e.T.Helper()
	out, err := exec.Command("ip", "-6", "-j", "-n", e.NS(node), "route", "show", "proto", "199").Output()
	if err != nil {
		e.T.Fatalf("ip route (%s): %v", node, err)
	}
	var rs []struct {
		Dst string `json:"dst"`
		hop
		Nexthops []hop `json:"nexthops"`
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		e.T.Fatalf("ip -j route: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, r := range rs {
		hops := r.Nexthops
		if len(hops) == 0 {
			hops = []hop{r.hop}
		}
		for _, h := range hops {
			m[r.Dst] = append(m[r.Dst], h.Dev)
		}
		sort.Strings(m[r.Dst])
	}
	return m
}

// waitRoute waits until node routes dst over exactly devs (nil: no
// route) and returns how long it took.
func (e *env) waitRoute(node, dst string, devs []string, limit time.Duration) time.Duration {
	e.T.Helper()
	start := time.Now()
	want := strings.Join(devs, ",")
	var got string
	for time.Since(start) < limit {
		got = strings.Join(e.bgpRoutes(node)[dst], ",")
		if got == want {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.T.Fatalf("%s: route to %s over %q, want %q after %v\nstatus:\n%s", node, dst, got, want, limit, e.Must("status", "--lab", e.Name))
	return 0
}

// vtyshRoutes is what FRR on router knows in IPv6 unicast (vtysh, through
// segchain lab exec): the destinations of `show bgp ipv6 unicast json`.
func (e *env) vtyshRoutes(router string) []string {
	e.T.Helper()
	out := e.Must("lab", "exec", "--lab", e.Name, router, "--", "vtysh", "-c", "show bgp ipv6 unicast json")
	if i := strings.IndexByte(out, '{'); i > 0 {
		out = out[i:] // vtysh's own warnings
	}
	var v struct {
		Routes map[string]any `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		e.T.Fatalf("vtysh json: %v\n%s", err, out)
	}
	var dsts []string
	for d := range v.Routes {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	return dsts
}

// session is one BGP session in status -o json.
type session struct {
	Node     string `json:"node"`
	Peer     string `json:"peer"`
	ASN      uint32 `json:"asn"`
	State    string `json:"state"`
	Admin    string `json:"admin"`
	Received uint64 `json:"received"`
	Note     string `json:"note"`
}

// sessions is status -o json's BGP sessions per node.
func (e *env) sessions() map[string][]session {
	e.T.Helper()
	var st struct {
		Nodes []struct {
			Node  string    `json:"node"`
			BGP   []session `json:"bgp"`
			Error string    `json:"error"`
		} `json:"nodes"`
	}
	out := e.Must("status", "--lab", e.Name, "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.T.Fatalf("status json: %v\n%s", err, out)
	}
	m := map[string][]session{}
	for _, n := range st.Nodes {
		if n.Error != "" {
			e.T.Fatalf("status: node %s: %s", n.Node, n.Error)
		}
		m[n.Node] = n.BGP
	}
	return m
}

// waitEstablished waits until every session of every node (GoBGP and
// FRR) is established and has received prefixes (every neighbour
// announces at least its link prefixes).
func (e *env) waitEstablished(limit time.Duration) map[string][]session {
	e.T.Helper()
	deadline := time.Now().Add(limit)
	for {
		ss := e.sessions()
		ok := len(ss) > 0
		for _, l := range ss {
			for _, s := range l {
				ok = ok && s.State == "established" && s.Received > 0
			}
		}
		if ok {
			return ss
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("BGP sessions not all established after %v: %+v", limit, ss)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const seqstream = "../../scripts/seqstream.py"

package bgp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// bfdSession is a BGP session of status -o json with its BFD state.
type bfdSession struct {
	Node  string `json:"node"`
	State string `json:"state"`
	Admin string `json:"admin"`
	Note  string `json:"note"`
	BFD   string `json:"bfd"`
}

// bfdSessions is status -o json's sessions: node → peer node → session.
func (e *env) bfdSessions() map[string]map[string]bfdSession {
	e.T.Helper()
	var st struct {
		Nodes []struct {
			Node string       `json:"node"`
			BGP  []bfdSession `json:"bgp"`
		} `json:"nodes"`
	}
	out := e.Must("status", "--lab", e.Name, "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.T.Fatalf("status json: %v\n%s", err, out)
	}
	m := map[string]map[string]bfdSession{}
	for _, n := range st.Nodes {
		m[n.Node] = map[string]bfdSession{}
		for _, s := range n.BGP {
			m[n.Node][s.Node] = s
		}
	}
	return m
}

// waitBFD waits until every session of every node has BFD in state want.
func (e *env) waitBFD(want string, limit time.Duration) {
	e.T.Helper()
	deadline := time.Now().Add(limit)
	for {
		ss := e.bfdSessions()
		ok := len(ss) > 0
		for _, peers := range ss {
			for _, s := range peers {
				ok = ok && s.BFD == want
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("BFD not %s on every session after %v: %+v", want, limit, ss)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitBFDDown waits until node's session with peer has BFD down, is not
// established and, for a GoBGP node (note != ""), says note; each end
// detects on its own clock, so one may follow the other by up to a
// detection time.
func (e *env) waitBFDDown(node, peer, note string, limit time.Duration) {
	e.T.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := e.bfdSessions()[node][peer]
		if s.BFD == "down" && s.State != "established" && (note == "" || s.Note == note) {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("%s's session with %s: %+v after %v, want BFD down, not established, noted %q", node, peer, s, limit, note)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// blackhole drops everything node receives on dev (nftables netdev
// ingress chain, policy drop; the carrier stays), as
// scripts/bgp-failover.sh's silent case does; removed at the end of the
// test even when it fails.
func (e *env) blackhole(node, dev string, on bool) {
	e.T.Helper()
	if on {
		testutil.Exec(e.T, e.NS(node), "nft", "add", "table", "netdev", "bftest")
		testutil.Exec(e.T, e.NS(node), "nft", "add chain netdev bftest in { type filter hook ingress device "+dev+" priority 0; policy drop; }")
		e.T.Cleanup(func() { testutil.ExecErr(e.NS(node), "nft", "delete", "table", "netdev", "bftest") })
		return
	}
	testutil.Exec(e.T, e.NS(node), "nft", "delete", "table", "netdev", "bftest")
}

// The redundant lab with BFD on every session and a BGP hold time of
// 30 s: a silent failure of the ingress–r1 link (GoBGP–FRR: segchain's
// BFD against bfdd; both ends drop what they receive, the carrier stays)
// moves ingress's route to nfv1 onto r2 long before the hold timer could
// have expired (at least 20 s after the failure: keepalives every 10 s),
// so only BFD explains it; status says so. Repaired, the route comes
// back. Then the same between two GoBGP nodes (egress–nfv1).
func TestPrivilegedBGPBFDSilentFailure(t *testing.T) {
	testutil.RequireTool(t, "nft")
	b, err := os.ReadFile(domainFile)
	if err != nil {
		t.Fatal(err)
	}
	const timers = "    keepalive: 1\n    hold: 3\n"
	if !strings.Contains(string(b), timers) {
		t.Fatalf("%s no longer has %q", domainFile, timers)
	}
	file := filepath.Join(t.TempDir(), "redundant-bfd.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), timers,
		"    keepalive: 10\n    hold: 30\n    bfd: true\n    bfd_interval: 250\n    bfd_multiplier: 4\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not FRR's defaults (3 x 300 ms), to see that r1's bfdd runs the
	// domain's; not faster either: on a loaded 2-CPU host 3 x 100 ms
	// flaps.
	e := newEnvPrefix(t, file, true, "bf-")
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "bfd 250ms x4") {
		t.Errorf("apply does not show the BFD timers:\n%s", out)
	}
	e.waitEstablished(60 * time.Second)
	// Both ends of every session run BFD: GoBGP nodes' own, FRR's bfdd.
	e.waitBFD("up", 30*time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 30*time.Second)
	// The steady state: past the speaker's BFD settle time (2.5 s) after
	// FRR replaces its first BFD session of each neighbor (docs/routing.md,
	// BFD), which takes a BFD down soon after up another way.
	time.Sleep(3 * time.Second)
	e.waitBFD("up", 30*time.Second)
	if out := testutil.Exec(t, e.NS("r1"), "vtysh", "--vty_socket", e.Lab.FRR["r1"], "-c", "show bfd peers"); !strings.Contains(out, "Transmission interval: 250ms") || !strings.Contains(out, "Detect-multiplier: 4") {
		t.Errorf("r1's bfdd does not run the domain's interval:\n%s", out)
	}

	failed := time.Now()
	e.blackhole("r1", "eth-ingress", true)
	e.blackhole("ingress", "eth-r1", true)
	// Well inside the 20 s before the hold timer could expire.
	const window = 5 * time.Second
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r2"}, window)
	e.waitRoute("ingress", "fc00:4::/64", []string{"eth-r2"}, window)
	e.waitBFDDown("ingress", "r1", "bfd down on eth-r1", window)
	e.waitBFDDown("r1", "ingress", "", window) // FRR's own account
	if since := time.Since(failed); since > 15*time.Second {
		t.Fatalf("checks took %v: the hold timer may have expired, the test proves nothing", since)
	}
	if s := e.bfdSessions()["ingress"]["r2"]; s.BFD != "up" || s.State != "established" {
		t.Errorf("ingress's session with r2: %+v, want untouched", s)
	}
	out := e.Must("status", "--lab", e.Name)
	if !strings.Contains(out, "bfd down on eth-r1") {
		t.Errorf("status does not say why:\n%s", out)
	}
	t.Logf("%v after the failure:\n%s", time.Since(failed).Round(time.Millisecond), out[strings.Index(out, "BGP NODE"):])

	e.blackhole("r1", "eth-ingress", false)
	e.blackhole("ingress", "eth-r1", false)
	e.waitBFD("up", 30*time.Second)
	e.waitEstablished(60 * time.Second)
	e.waitRoute("ingress", "fc00:2::/64", []string{"eth-r1"}, 30*time.Second)
	if s := e.bfdSessions()["ingress"]["r1"]; s.Note != "" {
		t.Errorf("ingress's session with r1 back, still noted %q", s.Note)
	}

	// Between two GoBGP nodes (segchain's BFD at both ends): egress
	// reaches nfv1 the long way round, over nfv2.
	e.waitRoute("egress", "fc00:2::/64", []string{"eth-nfv1"}, 10*time.Second)
	failed = time.Now()
	e.blackhole("egress", "eth-nfv1", true)
	e.blackhole("nfv1", "eth-egress", true)
	e.waitRoute("egress", "fc00:2::/64", []string{"eth-nfv2"}, window)
	e.waitBFDDown("egress", "nfv1", "bfd down on eth-nfv1", window)
	e.waitBFDDown("nfv1", "egress", "bfd down on eth-egress", window)
	if since := time.Since(failed); since > 15*time.Second {
		t.Fatalf("checks took %v: the hold timer may have expired, the test proves nothing", since)
	}
	e.blackhole("egress", "eth-nfv1", false)
	e.blackhole("nfv1", "eth-egress", false)
	e.waitBFD("up", 30*time.Second)
	e.waitRoute("egress", "fc00:2::/64", []string{"eth-nfv1"}, 30*time.Second)
}

package bgp

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/testutil"
)

// pathSegment is one SID of chains[].path in status -o json.
type pathSegment struct {
	SID      string     `json:"sid"`
	Node     string     `json:"node"`
	Behavior string     `json:"behavior"`
	Hops     [][]string `json:"hops"`
	Problems []string   `json:"problems"`
}

// paths is status -o json's path of every chain.
func (e *env) paths() map[string][]pathSegment {
	e.T.Helper()
	var st struct {
		Chains []struct {
			Name string        `json:"name"`
			Path []pathSegment `json:"path"`
		} `json:"chains"`
	}
	out := e.Must("status", "--lab", e.Name, "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.T.Fatalf("status json: %v\n%s", err, out)
	}
	m := map[string][]pathSegment{}
	for _, c := range st.Chains {
		m[c.Name] = c.Path
	}
	return m
}

// waitPath polls status until chain's path has, per SID, exactly the
// branches want, and fails naming the last path seen after limit.
func (e *env) waitPath(chain string, want [][][]string, limit time.Duration) {
	e.T.Helper()
	deadline := time.Now().Add(limit)
	for {
		var got [][][]string
		var problems []string
		for _, s := range e.paths()[chain] {
			got = append(got, s.Hops)
			problems = append(problems, s.Problems...)
		}
		diff := cmp.Diff(want, got)
		if diff == "" && len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("chain %s: path after %v (-want +got):\n%s\nproblems: %q\nstatus:\n%s", chain, limit, diff, problems, e.Must("status", "--lab", e.Name))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// In the redundant lab (routing: bgp, FRR on the routers) status shows
// chain web's path over r1; when ingress's link to r1 loses carrier the
// BGP speakers reroute without any apply and status follows them over r2
// (the only path left: r2 → nfv2 → egress → nfv1), and back over r1 when
// the carrier returns.
func TestPrivilegedBGPChainPath(t *testing.T) {
	e := newEnvArgs(t, domainFile, true)
	e.Must("apply", "--lab", e.Name)
	e.waitEstablished(60 * time.Second)

	overR1 := [][][]string{{{"ingress", "r1", "nfv1"}}, {{"nfv1", "egress"}}}
	e.waitPath("web", overR1, 60*time.Second)
	e.waitPath("alt", [][][]string{{{"ingress", "r2", "nfv2"}}, {{"nfv2", "egress"}}}, 10*time.Second)
	out := e.Must("status", "--lab", e.Name)
	if !strings.Contains(out, "web         ingress → r1 → nfv1 (") {
		t.Errorf("status prints no path line for web:\n%s", out)
	}
	t.Logf("status:\n%s", out)

	// The far end goes down: ingress's eth-r1 loses carrier.
	testutil.Exec(t, e.NS("r1"), "ip", "link", "set", "eth-ingress", "down")
	e.waitPath("web", [][][]string{{{"ingress", "r2", "nfv2", "egress", "nfv1"}}, {{"nfv1", "egress"}}}, 60*time.Second)
	t.Logf("status with eth-r1 down:\n%s", e.Must("status", "--lab", e.Name))

	testutil.Exec(t, e.NS("r1"), "ip", "link", "set", "eth-ingress", "up")
	e.waitPath("web", overR1, 90*time.Second)
}

// Under routing: static (agents on every node, no BGP) status's path is
// the one the packets take: the path names r1, and a ping through chain
// web crosses r1's link from ingress, not r2's.
func TestPrivilegedStaticChainPath(t *testing.T) {
	b, err := os.ReadFile(domainFile)
	if err != nil {
		t.Fatal(err)
	}
	// The redundant domain with its routing block (the last one) static.
	i := strings.LastIndex(string(b), "\nrouting:")
	if i < 0 {
		t.Fatalf("%s has no routing block", domainFile)
	}
	static := filepath.Join(t.TempDir(), "redundant-static.yaml")
	if err := os.WriteFile(static, []byte(string(b[:i])+"\nrouting:\n  mode: static\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnvArgs(t, static, false)
	e.Must("apply", "--lab", e.Name)

	path := e.paths()["web"]
	var problems []string
	crossed := map[string]bool{}
	for _, s := range path {
		problems = append(problems, s.Problems...)
		if len(s.Hops) != 1 {
			t.Errorf("SID %s: %d branches under static routing, want 1: %v", s.SID, len(s.Hops), s.Hops)
		}
		for _, br := range s.Hops {
			for _, n := range br {
				crossed[n] = true
			}
		}
	}
	if len(problems) > 0 || len(path) != 2 {
		t.Fatalf("web's path: %+v", path)
	}
	// The planner's shortest paths decide between r1 and r2; whichever
	// status names must be the router the packets cross.
	via, other := "r1", "r2"
	if crossed["r2"] {
		via, other = "r2", "r1"
	}
	if !crossed[via] || crossed[other] || !crossed["nfv1"] || !crossed["egress"] {
		t.Fatalf("web's path crosses %v", crossed)
	}
	before := map[string]uint64{via: rxPackets(t, e.NS(via), "eth-ingress"), other: rxPackets(t, e.NS(other), "eth-ingress")}
	const pings = 20
	dst := netip.MustParseAddr("fc00:4d::d")
	for i := range pings {
		if err := testutil.Ping(e.NS("s"), dst, 5*time.Second); err != nil {
			t.Fatalf("ping %d s → d through chain web: %v", i, err)
		}
	}
	gotVia := rxPackets(t, e.NS(via), "eth-ingress") - before[via]
	gotOther := rxPackets(t, e.NS(other), "eth-ingress") - before[other]
	// Neighbour discovery adds a few packets on either link.
	if gotVia < pings || gotOther >= pings {
		t.Errorf("status says web crosses %s: %s received %d packets from ingress, %s %d (for %d pings)", via, via, gotVia, other, gotOther, pings)
	}
}

// rxPackets is dev's received packets in ns (ip -s -j link), an oracle
// segchain did not write.
func rxPackets(t *testing.T, ns, dev string) uint64 {
	t.Helper()
	out := testutil.Exec(t, ns, "ip", "-s", "-j", "link", "show", "dev", dev)
	var ls []struct {
		Stats64 struct {
			RX struct {
				Packets json.Number `json:"packets"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -s -j link show %s: %v\n%s", dev, err, out)
	}
	n, err := strconv.ParseUint(ls[0].Stats64.RX.Packets.String(), 10, 64)
	if err != nil {
		t.Fatal(fmt.Errorf("rx packets of %s: %w", dev, err))
	}
	return n
}

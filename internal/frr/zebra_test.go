package frr_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestZebraLeavesSegchainRoutes starts zebra and bgpd (the way the lab's
// routers run them, Start) in a namespace that already holds a route, a
// seg6local SID, a seg6 policy and a rule of each of segchain's
// protocols, and checks that nothing of segchain's changed a few seconds
// later: no route removed, none copied. FRR's zebra takes the routes of
// its own numbers (186-198) found in the kernel for its daemons': FRR
// 8.4.4 installed a metric-20 copy of every protocol-197 route in front of
// it (OpenFabric), which is why segchain left 197 and 198 (the legacy
// numbers are seeded too, and what zebra did to them is logged).
func TestZebraLeavesSegchainRoutes(t *testing.T) {
	testutil.RequirePrivileged(t)
	if err := frr.Installed(); err != nil {
		t.Fatal(err) // make deps installs FRR
	}
	testutil.RequireTool(t, "vtysh")
	ns := testutil.UniqueName("pr-zebra-")
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nsutil.Delete(ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	dir, err := os.MkdirTemp("", "pr-zebra-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ip := func(args ...string) { testutil.Exec(t, ns, append([]string{"ip"}, args...)...) }
	ip("link", "set", "lo", "up")
	ip("link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ip("link", "set", "d0", "up")
	ip("link", "set", "d1", "up")
	ip("-6", "addr", "add", "fc00:99::1/64", "dev", "d0", "nodad")
	ip("addr", "add", "10.99.0.1/24", "dev", "d0")

	ours := []int{nodestate.Proto, nodestate.ProtoManual, nodestate.ProtoBGP, nodestate.ProtoNFLoop, srv6svc.RouteProtocol}
	legacy := []int{nodestate.ProtoLegacy, nodestate.ProtoManualLegacy}
	for i, p := range append(append([]int(nil), ours...), legacy...) {
		ps := fmt.Sprint(p)
		ip("-6", "route", "add", fmt.Sprintf("fc00:%d::/64", p), "via", "fc00:99::2", "dev", "d0", "proto", ps)
		ip("-4", "route", "add", fmt.Sprintf("10.%d.0.0/16", p), "via", "10.99.0.2", "dev", "d0", "proto", ps)
		ip("-6", "route", "add", "local", fmt.Sprintf("fc00:2::%d/128", p), "encap", "seg6local", "action", "End", "dev", "lo", "proto", ps)
		ip("-6", "route", "add", fmt.Sprintf("fc00:5:%d::/64", p), "encap", "seg6", "mode", "encap", "segs", "fc00:2::1", "dev", "d0", "table", "100", "proto", ps)
		ip("-6", "rule", "add", "pref", fmt.Sprint(1000+i), "from", fmt.Sprintf("fc00:%d::/64", p), "lookup", "100", "proto", ps)
	}
	snap := func(p int) string {
		var b strings.Builder
		for _, c := range [][]string{{"-6", "route", "show", "table", "all"}, {"-4", "route", "show", "table", "all"}} {
			b.WriteString(testutil.Exec(t, ns, append(append([]string{"ip", "-N"}, c...), "proto", fmt.Sprint(p))...))
		}
		// ip rule filters nothing by protocol: keep the lines of p.
		for _, l := range strings.Split(testutil.Exec(t, ns, "ip", "-N", "-6", "rule", "show"), "\n") {
			if strings.HasSuffix(l, fmt.Sprintf(" proto %d", p)) {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	before := map[int]string{}
	for _, p := range append(append([]int(nil), ours...), legacy...) {
		before[p] = snap(p)
	}

	if err := frr.Start(ns, dir, frr.Config{Zebra: "hostname " + ns + "\n",
		BGPD: "hostname " + ns + "\nrouter bgp 65001\n bgp router-id 10.99.0.1\n no bgp default ipv4-unicast\nexit\n"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := frr.Stop(dir); err != nil {
			t.Errorf("stop FRR: %v", err)
		}
	})
	// Instead of a fixed wait: zebra has read the kernel once its RIB lists
	// every route of ours (this zebra does not sweep foreign protocols at
	// start-up; not even a protocol-11 leftover of its own is removed).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rib, _ := exec.Command("ip", "netns", "exec", ns, "vtysh", "--vty_socket", dir, "-c", "show ipv6 route").CombinedOutput()
		missing := ""
		for _, p := range ours {
			if r := fmt.Sprintf("fc00:%d::/64", p); !strings.Contains(string(rib), r) {
				missing = r
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zebra's RIB lacks %s 60 s after start:\n%s", missing, rib)
		}
	}
	v, _ := exec.Command("/usr/lib/frr/zebra", "--version").Output()
	rib, _ := exec.Command("ip", "netns", "exec", ns, "vtysh", "--vty_socket", dir, "-c", "show ipv6 route").CombinedOutput()
	t.Logf("%s\nzebra's RIB:\n%s", firstLine(string(v)), rib)
	for _, p := range ours {
		if got := snap(p); got != before[p] {
			t.Errorf("protocol %d changed after zebra started:\nbefore:\n%s\nafter:\n%s", p, before[p], got)
		}
	}
	for _, p := range legacy {
		if got := snap(p); got != before[p] {
			t.Logf("legacy protocol %d changed after zebra started (why segchain left it):\n%s", p, got)
		}
	}

	// Stopping zebra removes what zebra installed; ours stay.
	if err := frr.Stop(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range ours {
		if got := snap(p); got != before[p] {
			t.Errorf("protocol %d changed after zebra stopped:\nbefore:\n%s\nafter:\n%s", p, before[p], got)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

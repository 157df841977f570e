package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// l2Domain is an L2 service chain and a capped per-flow chain, all from the
// domain file: H.Encaps.L2 at the ingress, an inner ethernet proxy on nfv1
// in front of sf1 (made a bridge by the test: the lab builds no L2 SFs),
// End.DX2 at the egress; and an IPv6 chain through a dynamic-flow proxy
// with flow_max on a third link to sf1, which forwards it back.
//
//	s ── ingress ── nfv1 ── egress ── d
//	                 ║║│
//	   eth-sfa ──► sw0 ┐
//	               br0 (nft bridge filter: drops UDP 7001)   sf1
//	   eth-sfb ◄── sw1 ┘
//	   eth-sfc ◄─► ip0 (IPv6 forwarding; first interface by name: the default route)
const l2Domain = `
name: l2proxy
nodes:
  s:       {role: host,    id: 0xa}
  ingress: {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv1:    {role: nfv,     id: 2, locator: "fc00:2::/64"}
  egress:  {role: egress,  id: 4, locator: "fc00:4::/64"}
  d:       {role: host,    id: 0xd}
  sf1:     {role: sf,      id: 7}
links:
  - {endpoints: ["s:eth-ingress", "ingress:eth-s"], ipv6: "fc00:1a::/64"}
  - {endpoints: ["ingress:eth-nfv1", "nfv1:eth-ingress"], ipv6: "fc00:12::/64"}
  - {endpoints: ["nfv1:eth-egress", "egress:eth-nfv1"], ipv6: "fc00:24::/64"}
  - {endpoints: ["egress:eth-d", "d:eth-egress"], ipv6: "fc00:4d::/64"}
  - {endpoints: ["nfv1:eth-sfc", "sf1:ip0"], ipv6: "fc00:27::/64"}
  - {endpoints: ["nfv1:eth-sfa", "sf1:sw0"], ipv6: "fc00:28::/64"}
  - {endpoints: ["nfv1:eth-sfb", "sf1:sw1"], ipv6: "fc00:29::/64"}
services:
  nfv1-br:
    node: nfv1
    kind: sr-unaware
    proxy: dynamic
    inner: ethernet
    iface_out: eth-sfa
    iface_in: eth-sfb
  nfv1-cap:
    node: nfv1
    kind: sr-unaware
    proxy: dynamic-flow
    inner: ipv6
    sf_nh6: "fc00:27::7"
    iface_out: eth-sfc
    iface_in: eth-sfc
    flow_max: 100
    flow_timeout: 30
chains:
  l2:
    ingress: ingress
    mode: l2encap
    match: {dst: "fc00:4d::/64", proto: udp, dport: "7000-7999"}
    services: [nfv1-br]
    egress: {node: egress, behavior: End.DX2, oif: eth-d}
  capped:
    ingress: ingress
    match: {dst: "fc00:4d::/64", proto: udp, dport: "8000-8999"}
    services: [nfv1-cap]
    egress: {node: egress, behavior: End.DX6, nh6: "fc00:4d::d"}
`

const l2Bridge = `table bridge l2fw {
	chain flt {
		type filter hook forward priority 0; policy accept;
		udp dport 7001 counter drop
	}
}
`

// udpCounts sends 5 datagrams from s to d on each port and returns how
// many d received per port (d waits up to 15 s for the first datagram,
// then listens until 2 s pass without one).
func udpCounts(t *testing.T, e *env, ports ...int) map[int]int {
	t.Helper()
	ps := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ports)), ","), "[]")
	srv := exec.Command("ip", "netns", "exec", e.NS("d"), "python3", "-c", fmt.Sprintf(`
import socket, select
ss = {}
for p in (%s,):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("::", p)); ss[s] = p
n = {p: 0 for p in ss.values()}
print("ready", flush=True)
wait = 15  # for the first datagram: the sender starts after "ready", late on a loaded machine
while True:
    r, _, _ = select.select(list(ss), [], [], wait)
    if not r:
        break
    wait = 2
    for s in r:
        s.recv(100); n[ss[s]] += 1
print(" ".join("%%d=%%d" %% kv for kv in sorted(n.items())), flush=True)
`, ps))
	var stderr strings.Builder
	srv.Stderr = &stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = srv.Wait()
		t.Fatalf("receiver did not start: %q %s", lines.Text(), stderr.String())
	}
	if out, err := testutil.ExecErr(e.NS("s"), "python3", "-c", fmt.Sprintf(`
import socket, time
c = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for i in range(5):
    for p in (%s,):
        c.sendto(b"segchain-l2", ("fc00:4d::d", p)); time.sleep(0.02)
`, ps)); err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	if !lines.Scan() {
		_ = srv.Wait()
		t.Fatalf("receiver: no result: %s", stderr.String())
	}
	got := map[int]int{}
	for _, f := range strings.Fields(lines.Text()) {
		var p, n int
		if _, err := fmt.Sscanf(f, "%d=%d", &p, &n); err == nil {
			got[p] = n
		}
	}
	return got
}

// TestProxyDomainEthernet applies an L2 chain through an inner ethernet
// proxy and a per-flow proxy with flow_max, both from the domain file:
// the bridge behind the proxy filters the client's own frames, d gets the
// accepted flow only, and the proxies carry the planned parameters.
func TestProxyDomainEthernet(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireTool(t, "python3")
	file := filepath.Join(t.TempDir(), "l2.yaml")
	if err := os.WriteFile(file, []byte(l2Domain), 0o644); err != nil {
		t.Fatal(err)
	}
	e := setup(t, file)
	nfv1 := e.NS("nfv1")
	t.Cleanup(func() { _ = srunaware.Remove(nfv1) }) // if the test fails before destroy

	// sf1 becomes a bridge between sw0 and sw1 (nothing speaks IP on the L2
	// segment), with an nftables bridge filter.
	sf := e.NS("sf1")
	for _, c := range []string{"ip addr flush dev sw0", "ip addr flush dev sw1",
		"ip link add br0 type bridge", "sysctl -qw net.ipv6.conf.br0.disable_ipv6=1",
		"ip link set sw0 master br0", "ip link set sw1 master br0", "ip link set br0 up"} {
		testutil.Exec(t, sf, strings.Fields(c)...)
	}
	rules := filepath.Join(t.TempDir(), "l2.nft")
	if err := os.WriteFile(rules, []byte(l2Bridge), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, sf, "nft", "-f", rules)
	// The frames keep the client's L2 header end to end (destination: the
	// ingress' MAC on s's link), so d takes that MAC to accept them, and
	// the egress' neighbour entry for d (the lab's, permanent) follows.
	var ingressMAC string
	if err := nsutil.Do(e.NS("ingress"), func() error {
		i, err := net.InterfaceByName("eth-s")
		if err == nil {
			ingressMAC = i.HardwareAddr.String()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, e.NS("d"), "ip", "link", "set", "eth-egress", "address", ingressMAC)
	testutil.Exec(t, e.NS("egress"), "ip", "neigh", "replace", "fc00:4d::d", "lladdr", ingressMAC, "dev", "eth-d", "nud", "permanent")

	if res := e.apply(); res.Changes() == 0 {
		t.Fatal("first apply changed nothing")
	}
	if res := e.apply(); res.Changes() != 0 {
		t.Errorf("second apply made %d changes: %+v", res.Changes(), res.Diffs)
	}

	entries, err := srunaware.Extension{}.Show(nfv1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, en := range entries {
		var kv []string
		for _, k := range []string{"inner", "nh6", "mac", "oif", "iif", "flow", "max", "timeout"} {
			if v, ok := en.Params[k]; ok {
				kv = append(kv, k+"="+v)
			}
		}
		got[en.SID.Addr().String()] = en.Behavior + " " + strings.Join(kv, " ")
	}
	want := map[string]string{
		e.sid("nfv1-br").String():  "End.AD inner=ethernet oif=eth-sfa iif=eth-sfb",
		e.sid("nfv1-cap").String(): "End.AD inner=ipv6 nh6=fc00:27::7 oif=eth-sfc iif=eth-sfc flow=true max=100 timeout=30",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("proxies on nfv1 (-want +got):\n%s", diff)
	}

	t.Run("dynamic: the bridge filters the client's frames, d gets 7000 and 8000", func(t *testing.T) {
		dx2 := e.counters("egress", e.sid(config.EgressKey("l2"))).Packets
		counts := udpCounts(t, e, 7000, 7001, 8000)
		if diff := cmp.Diff(map[int]int{7000: 5, 7001: 0, 8000: 5}, counts); diff != "" {
			t.Errorf("datagrams at d (-want +got):\n%s", diff)
		}
		if out := testutil.Exec(t, sf, "nft", "list", "chain", "bridge", "l2fw", "flt"); !strings.Contains(out, "counter packets 5") {
			t.Errorf("bridge filter did not drop the 5 frames of 7001:\n%s", out)
		}
		if after := e.counters("egress", e.sid(config.EgressKey("l2"))).Packets; after < dx2+5 {
			t.Errorf("End.DX2 counter %d -> %d, want at least 5 more", dx2, after)
		}
	})

	t.Run("static: the same chain through End.AS inner ethernet", func(t *testing.T) {
		src := strings.Replace(l2Domain, "    proxy: dynamic\n    inner: ethernet", "    proxy: static\n    inner: ethernet", 1)
		d, err := config.Parse([]byte(src), filepath.Dir(file))
		if err != nil {
			t.Fatal(err)
		}
		e.d, e.ctl = d, e.Session(d)
		res := e.apply()
		var ops []string
		for _, df := range res.Diffs {
			for _, op := range df.Ops() {
				ops = append(ops, df.Node+" "+strings.SplitN(op.String(), "\n", 2)[0])
			}
		}
		if diff := cmp.Diff([]string{"nfv1 ~ proxies: 2 -> 2"}, ops); diff != "" {
			t.Errorf("apply ops (-want +got):\n%s", diff)
		}
		if pc := e.counters("nfv1", e.sid("nfv1-br")); pc.Behavior != srunaware.EndAS {
			t.Errorf("nfv1-br behaviour = %s, want End.AS", pc.Behavior)
		}
		if diff := cmp.Diff(map[int]int{7000: 5, 7001: 0}, udpCounts(t, e, 7000, 7001)); diff != "" {
			t.Errorf("datagrams at d (-want +got):\n%s", diff)
		}
	})

	if _, err := e.ctl.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if proxyPinned(t, nfv1) {
		t.Error("pinned proxy state left after destroy")
	}
}

// Package e2e runs whole domains from YAML in namespace labs: apply through
// the controller, real traffic, and checks with oracles segchain did not
// write (tshark dissections of tcpdump captures, scapy-crafted packets,
// iproute2 listings).
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/dump"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/session"
	"github.com/segchain/segchain/internal/srh"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// env is a domain file's lab, brought up in-process (labenv: taken down
// and checked for leftovers at the end), and an apply session on it.
type env struct {
	*labenv.Env
	d   *config.Domain
	ctl *session.Session
}

// setup brings up a lab for the domain file under a unique name (removed
// when the test ends, even on failure) and opens its apply session.
func setup(t *testing.T, file string) *env {
	t.Helper()
	le := labenv.New(t, labenv.Options{File: file, Prefix: "e2e"})
	e := &env{Env: le, d: le.Domain}
	e.ctl = e.Session(e.d)
	return e
}

func (e *env) apply() *controller.Result {
	e.T.Helper()
	res, err := e.ctl.Apply(context.Background())
	if err != nil {
		e.T.Fatalf("apply: %v", err)
	}
	return res
}

func (e *env) sid(name string) netip.Addr {
	e.T.Helper()
	sids, err := e.d.SIDs()
	if err != nil {
		e.T.Fatal(err)
	}
	a, ok := sids[name]
	if !ok {
		e.T.Fatalf("no SID named %s", name)
	}
	return a
}

// counters returns the counters of the local SID entry covering sid.
func (e *env) counters(node string, sid netip.Addr) agent.SIDCounters {
	e.T.Helper()
	cs, err := local.NewLocal(node, e.NS(node)).Counters(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	for _, c := range cs {
		if c.SID.Contains(sid) {
			return c
		}
	}
	e.T.Fatalf("node %s has no local SID covering %s", node, sid)
	return agent.SIDCounters{}
}

func (e *env) ping(from string, dst string) error {
	return testutil.Ping(e.NS(from), netip.MustParseAddr(dst), 3*time.Second)
}

func TestDefaultDomainEndToEnd(t *testing.T) {
	e := setup(t, "../../examples/default.yaml")
	res := e.apply()
	if res.Changes() == 0 {
		t.Fatal("first apply changed nothing")
	}
	t.Run("second apply changes nothing", func(t *testing.T) {
		if res := e.apply(); res.Changes() != 0 {
			t.Errorf("second apply made %d changes: %+v", res.Changes(), res.Diffs)
		}
	})

	end1, end2, dx6 := e.sid("nfv1-end"), e.sid("nfv2-end"), e.sid(config.EgressKey("web"))

	t.Run("H.Encaps chain web: SRH seen by tshark at nfv1, counters move", func(t *testing.T) {
		before := e.counters("egress", dx6).Packets
		c := testutil.StartCapture(t, e.NS("nfv1"), "eth-r1", "ip6 proto 43", 1)
		if err := e.ping("s", "fc00:4d::d"); err != nil {
			t.Fatalf("ping s -> d through the chain: %v", err)
		}
		pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.src", "ipv6.dst", "ipv6.routing.type",
			"ipv6.routing.segleft", "ipv6.routing.srh.addr", "icmpv6.type")
		if len(pkts) == 0 {
			t.Fatal("no SRv6 packet captured on nfv1")
		}
		p := pkts[0]
		wantSegs := strings.Join([]string{dx6.String(), end2.String(), end1.String()}, "|")
		checks := map[string]string{
			"ipv6.src":              "fc00:1::1", // the ingress' tunnel source
			"ipv6.routing.type":     "4",
			"ipv6.routing.segleft":  "2",
			"ipv6.routing.srh.addr": wantSegs,
		}
		for f, want := range checks {
			got := p.First(f)
			if f == "ipv6.routing.srh.addr" {
				got = strings.Join(p[f], "|")
			}
			if got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
		if got := p["ipv6.dst"]; len(got) < 2 || got[0] != end1.String() || got[1] != "fc00:4d::d" {
			t.Errorf("outer/inner dst = %v, want [%s fc00:4d::d]", got, end1)
		}
		if after := e.counters("egress", dx6).Packets; after <= before {
			t.Errorf("End.DX6 counter did not move: %d -> %d", before, after)
		}
	})

	t.Run("dump at an SRv6 node shows the packet as it arrived, not after End ran", func(t *testing.T) {
		src, err := dump.OpenLive(e.NS("nfv1"), "eth-r1", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got := make(chan *srh.Packet, 1)
		go func() {
			for {
				frame, _, err := src.Next(ctx)
				if err != nil {
					close(got)
					return
				}
				if len(frame) > 14 {
					if p, err := srh.DecodePacket(frame[14:]); err == nil && p.SRH != nil {
						got <- p
						return
					}
				}
			}
		}()
		time.Sleep(200 * time.Millisecond)
		if err := e.ping("s", "fc00:4d::d"); err != nil {
			t.Fatal(err)
		}
		p, ok := <-got
		if !ok {
			t.Fatal("no SRv6 packet captured")
		}
		if p.SRH.SegmentsLeft != 2 || p.Dst != end1 {
			t.Errorf("captured SL %d dst %s, want SL 2 dst %s (as received from r1)", p.SRH.SegmentsLeft, p.Dst, end1)
		}
	})

	t.Run("classifier: UDP 5000-5999 takes insert6 (SRH inserted, no encap)", func(t *testing.T) {
		c := testutil.StartCapture(t, e.NS("d"), "eth-egress", "ip6 proto 43", 1) // UDP behind the SRH
		testutil.RunScapyIn(t, e.NS("s"), `
send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000, dport=5555)/b"insert-mode", verbose=0)
`)
		pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.src", "ipv6.dst", "ipv6.routing.segleft",
			"ipv6.routing.srh.addr", "udp.dstport")
		if len(pkts) != 1 {
			t.Fatalf("d captured %d UDP packets, want 1", len(pkts))
		}
		p := pkts[0]
		if got := p["ipv6.dst"]; len(got) != 1 || got[0] != "fc00:4d::d" {
			t.Errorf("dst = %v: want one IPv6 header (insert mode, no encapsulation)", got)
		}
		if p.First("ipv6.src") != "fc00:1a::a" || p.First("ipv6.routing.segleft") != "0" {
			t.Errorf("src %s SL %s, want the original source and SL 0", p.First("ipv6.src"), p.First("ipv6.routing.segleft"))
		}
		wantSegs := strings.Join([]string{"fc00:4d::d", end2.String(), end1.String()}, "|")
		if got := strings.Join(p["ipv6.routing.srh.addr"], "|"); got != wantSegs {
			t.Errorf("segment list = %s, want %s", got, wantSegs)
		}
	})

	t.Run("classifier: UDP outside 5000-5999 takes web (encap, decapsulated at egress)", func(t *testing.T) {
		before := e.counters("egress", dx6).Packets
		c := testutil.StartCapture(t, e.NS("d"), "eth-egress", "udp", 1)
		testutil.RunScapyIn(t, e.NS("s"), `
send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000, dport=7000)/b"encap-mode", verbose=0)
`)
		pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst", "ipv6.routing.type", "udp.dstport")
		if len(pkts) != 1 {
			t.Fatalf("d captured %d UDP packets, want 1", len(pkts))
		}
		if pkts[0].First("ipv6.routing.type") != "" {
			t.Errorf("packet reached d with a routing header: %v", pkts[0])
		}
		if after := e.counters("egress", dx6).Packets; after != before+1 {
			t.Errorf("End.DX6 counter %d -> %d, want +1", before, after)
		}
	})

	t.Run("bulk TCP through chain web: full-size packets fit the fabric MTU", func(t *testing.T) {
		before := e.counters("egress", dx6).Packets
		srv := exec.Command("ip", "netns", "exec", e.NS("d"), "timeout", "20", "python3", "-c", `
import socket
s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 9000)); s.listen(1); print("ready", flush=True)
c,_=s.accept(); n=0
while True:
    d=c.recv(65536)
    if not d: break
    n+=len(d)
print(n)
`)
		out, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer srv.Wait()
		sc := bufio.NewScanner(out)
		if !sc.Scan() {
			t.Fatal("server in d did not start")
		}
		if msg, err := testutil.ExecErr(e.NS("s"), "timeout", "15", "python3", "-c", `
import socket
c=socket.create_connection(("fc00:4d::d", 9000), timeout=10); c.sendall(b"x"*2000000); c.close()
`); err != nil {
			t.Fatalf("send 2 MB from s: %v\n%s", err, msg)
		}
		if !sc.Scan() || sc.Text() != "2000000" {
			t.Errorf("d received %q bytes, want 2000000", sc.Text())
		}
		if after := e.counters("egress", dx6).Packets; after <= before {
			t.Errorf("the transfer did not take chain web (End.DX6 %d -> %d)", before, after)
		}
	})

	t.Run("chain filtered: the SR-aware firewall on nfv2 drops UDP 6666, accepts 6000", func(t *testing.T) {
		fwSID := netip.PrefixFrom(e.sid("nfv2-fw"), 112)
		rules := func() (perRule []uint64, policy uint64) {
			sts, err := firewall.List(e.NS("nfv2"))
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				if st.Instance.SID == fwSID {
					for _, r := range st.Rules {
						perRule = append(perRule, r.Packets)
					}
					return perRule, st.Counters.Policy
				}
			}
			t.Fatalf("no firewall instance %s on nfv2: %+v", fwSID, sts)
			return nil, 0
		}
		dx6 := e.sid(config.EgressKey("filtered"))
		before, policyBefore := rules()
		dxBefore := e.counters("egress", dx6).Packets
		if diff := cmp.Diff(map[int]int{6000: 5, 6666: 0}, udpCounts(t, e, 6000, 6666)); diff != "" {
			t.Errorf("datagrams at d (-want +got):\n%s", diff)
		}
		after, policyAfter := rules()
		if len(before) != 2 || len(after) != 2 {
			t.Fatalf("rules before %v after %v, want 2", before, after)
		}
		// Rule 1 (basic: -p udp --dport 6666 -j DROP) took the five 6666
		// datagrams, rule 2 (advanced: -m srh --srh-psid on nfv1's locator)
		// the five 6000 ones; the drop policy none.
		if d1, d2 := after[0]-before[0], after[1]-before[1]; d1 != 5 || d2 != 5 || policyAfter != policyBefore {
			t.Errorf("rule counters +%d +%d policy +%d, want +5 +5 +0", d1, d2, policyAfter-policyBefore)
		}
		if got := e.counters("egress", dx6).Packets - dxBefore; got != 5 {
			t.Errorf("filtered's End.DX6 counted +%d, want +5 (only the accepted flow)", got)
		}
	})

	t.Run("IPv4 chain legacy4: End.DX4 delivers", func(t *testing.T) {
		dx4 := e.sid(config.EgressKey("legacy4"))
		before := e.counters("egress", dx4).Packets
		if err := e.ping("s", "198.18.4.13"); err != nil {
			t.Fatalf("ping 198.18.4.13: %v", err)
		}
		if after := e.counters("egress", dx4).Packets; after <= before {
			t.Errorf("End.DX4 counter did not move: %d -> %d", before, after)
		}
	})
}

func TestFailedApplyRollsBack(t *testing.T) {
	e := setup(t, "../../examples/default.yaml")
	e.apply()
	observe := func(c *controller.Controller) map[string]string {
		out := map[string]string{}
		for n, a := range c.Agents {
			got, err := a.Observe(context.Background(), c.Plan.Nodes[n])
			if err != nil {
				t.Fatal(err)
			}
			out[n] = fmt.Sprintf("%+v", *got)
		}
		return out
	}

	// A second domain adds an End SID on nfv1 and an End.DT4 on nfv2. The End
	// installs fine; End.DT4 needs a VRF device, which this kernel lacks, so
	// the apply fails part-way and must undo the End too.
	d2, err := config.Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d2.Services["extra-end"] = &config.Service{Node: "nfv1", Behavior: "End"}
	d2.Services["bad-dt4"] = &config.Service{Node: "nfv2", Behavior: "End.DT4", Params: config.Params{VRFTable: 4242}}
	s2 := e.Session(d2)
	c2 := s2.Controller()
	// Plan's kernel probe would refuse End.DT4 before anything changes;
	// this test wants the failure part-way, so its agents hide the probe
	// (agent.FeatureChecker).
	for n, a := range c2.Agents {
		c2.Agents[n] = noProbe{a}
	}
	before := observe(c2)
	res, err := s2.Apply(context.Background())
	if err == nil {
		t.Skip("End.DT4 installed: this kernel has VRF, so the injected failure does not fail")
	}
	t.Logf("apply failed as intended: %v", err)
	if !res.RolledBack {
		t.Errorf("result not marked rolled back: %+v", res.Errors)
	}
	if diff := cmpMaps(before, observe(c2)); diff != "" {
		t.Errorf("state after the failed apply differs from before:\n%s", diff)
	}
	if res := e.apply(); res.Changes() != 0 {
		t.Errorf("original domain no longer applied after rollback: %d changes", res.Changes())
	}
}

// noProbe is an agent without its kernel feature probe (Caps.Features).
type noProbe struct{ agent.Agent }

func (n noProbe) Caps() agent.Caps {
	c := n.Agent.Caps()
	c.Features = nil
	return c
}

func cmpMaps(a, b map[string]string) string {
	var out []string
	for k := range a {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("node %s:\n  before %s\n  after  %s", k, a[k], b[k]))
		}
	}
	return strings.Join(out, "\n")
}

func TestDestroyRemovesOnlyOwnState(t *testing.T) {
	e := setup(t, "../../examples/default.yaml")
	ns := e.NS("nfv1")
	fwdBefore := strings.TrimSpace(testutil.Exec(t, ns, "sysctl", "-n", "net.ipv6.conf.all.forwarding"))
	e.apply()
	// Someone else's route and rule on the same node must survive destroy.
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:99::/64", "via", "fc00:25::5", "dev", "eth-r1")
	testutil.Exec(t, ns, "ip", "-6", "rule", "add", "to", "fc00:98::/64", "lookup", "main", "pref", "777")
	if _, err := e.ctl.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	routes := testutil.Exec(t, ns, "ip", "-6", "route", "show", "table", "all", "proto", fmt.Sprint(nodestate.Proto))
	if strings.TrimSpace(routes) != "" {
		t.Errorf("segchain routes left after destroy:\n%s", routes)
	}
	if out := testutil.Exec(t, ns, "ip", "-6", "route", "show", "fc00:99::/64"); !strings.Contains(out, "fc00:99::/64") {
		t.Error("destroy removed a route segchain did not install")
	}
	if out := testutil.Exec(t, ns, "ip", "-6", "rule", "show"); !strings.Contains(out, "777:") {
		t.Error("destroy removed a rule segchain did not install")
	}
	ing := testutil.Exec(t, e.NS("ingress"), "ip", "-6", "rule", "show")
	if strings.Contains(ing, "lookup 8825") {
		t.Errorf("chain rule left on ingress:\n%s", ing)
	}
	if got := strings.TrimSpace(testutil.Exec(t, ns, "sysctl", "-n", "net.ipv6.conf.all.forwarding")); got != fwdBefore {
		t.Errorf("forwarding = %s after destroy, want the original %s", got, fwdBefore)
	}
}

func TestBidirectionalChain(t *testing.T) {
	e := setup(t, "../../examples/bidirectional.yaml")
	e.apply()
	fwd, ret := e.sid(config.EgressKey("ab")), e.sid(config.ReturnKey("ab"))
	end := e.sid("nfv1-end")
	b1, b2, b3 := e.counters("edge2", fwd).Packets, e.counters("edge1", ret).Packets, e.counters("nfv1", end).Packets
	if err := e.ping("a", "fc00:3b::b"); err != nil {
		t.Fatalf("ping a -> b: %v", err)
	}
	// The request takes ab (decapsulated at edge2), the reply ab/reverse
	// (decapsulated at edge1); both cross nfv1's End.
	if a := e.counters("edge2", fwd).Packets; a <= b1 {
		t.Errorf("forward egress counter did not move (%d -> %d)", b1, a)
	}
	if a := e.counters("edge1", ret).Packets; a <= b2 {
		t.Errorf("reverse egress counter did not move (%d -> %d): the reply did not take the reverse chain", b2, a)
	}
	if a := e.counters("nfv1", end).Packets; a < b3+2 {
		t.Errorf("nfv1 End saw %d packets, want request and reply", a-b3)
	}
}

func TestHMACRequiredDropsUnsignedAndWrongKey(t *testing.T) {
	e := setup(t, "../../examples/hmac.yaml")
	e.apply()
	end := e.sid("nfv1-end")
	dx6 := e.sid(config.EgressKey("signed"))

	t.Run("signed chain delivers", func(t *testing.T) {
		c := testutil.StartCapture(t, e.NS("nfv1"), "eth-ingress", "ip6 proto 43", 1)
		if err := e.ping("s", "fc00:4d::d"); err != nil {
			t.Fatalf("ping through the signed chain: %v", err)
		}
		pcap := c.Wait(5 * time.Second)
		// tshark does not decode SRH TLVs: read the raw routing header length
		// (3 segments would be hdr-len 6; the 40-byte HMAC TLV adds 5).
		pkts := testutil.Tshark(t, pcap, "ipv6.routing.len")
		if len(pkts) == 0 || pkts[0].First("ipv6.routing.len") != "9" {
			t.Errorf("routing header len = %v, want 9 (2 segments + HMAC TLV)", pkts)
		}
	})

	for _, tc := range []struct{ name, tlv string }{
		{"no HMAC TLV", ""},
		{"wrong HMAC", `, tlv_objects=[SRHHMAC(keyid=1001, hmac=b"\x01"*32)]`},
		{"unknown key id", `, tlv_objects=[SRHHMAC(keyid=4242, hmac=b"\x01"*32)]`},
	} {
		t.Run("dropped at nfv1: "+tc.name, func(t *testing.T) {
			before := e.counters("nfv1", end)
			cBefore := e.boundaryDrops("nfv1", "eth-ingress", "hmac-missing") +
				e.boundaryDrops("nfv1", "eth-ingress", "hmac-malformed") +
				e.boundaryDrops("nfv1", "eth-ingress", "hmac-unknown-key")
			dxBefore := e.counters("egress", dx6).Packets
			testutil.RunScapyIn(t, e.NS("ingress"), fmt.Sprintf(`
srh = IPv6ExtHdrSegmentRouting(addresses=["%s", "%s"], segleft=1, lastentry=1%s)
p = IPv6(src="fc00:1::1", dst="%s")/srh/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/ICMPv6EchoRequest()
send(p, count=3, verbose=0)
`, dx6, end, tc.tlv, end))
			after := e.counters("nfv1", end)
			// Dropped by the kernel's HMAC check (the SID's errors) or,
			// for what it would drop without a reason, before it by the
			// boundary's HMAC classifier (docs/security.md).
			classified := func() uint64 {
				return e.boundaryDrops("nfv1", "eth-ingress", "hmac-missing") +
					e.boundaryDrops("nfv1", "eth-ingress", "hmac-malformed") +
					e.boundaryDrops("nfv1", "eth-ingress", "hmac-unknown-key")
			}
			if got := after.Errors - before.Errors + classified() - cBefore; got < 3 {
				t.Errorf("nfv1 End errors %d -> %d and classifier drops +%d: want 3 drops in all", before.Errors, after.Errors, classified()-cBefore)
			}
			if got := e.counters("egress", dx6).Packets; got != dxBefore {
				t.Errorf("a packet reached the egress (%d -> %d)", dxBefore, got)
			}
		})
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}

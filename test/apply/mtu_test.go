package apply

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// mtuStatus is status -o json's headroom part and the web chain's hops.
type mtuStatus struct {
	Chains []struct {
		Name string            `json:"name"`
		Hops []json.RawMessage `json:"hops"`
	} `json:"chains"`
	MTU      []controller.MTUWarning `json:"mtu"`
	MTUNotes []string                `json:"mtu_notes"`
}

func (e *env) mtuStatus() mtuStatus {
	e.T.Helper()
	out, code := e.stdout("status", "-f", domainFile, "--lab", e.Name, "-o", "json")
	if code != 0 {
		e.T.Fatalf("status -o json: exit %d\n%s", code, out)
	}
	var st mtuStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.T.Fatalf("status -o json: %v\n%s", err, out)
	}
	return st
}

// shrinkUplink sets the headend's link to r1 (both ends) to 1500, the
// hosts' MTU: a full-size packet of s no longer fits once encapsulated.
func shrinkUplink(t *testing.T, l *labenv.Env) {
	testutil.Exec(t, l.NS("ingress"), "ip", "link", "set", "eth-r1", "mtu", "1500")
	testutil.Exec(t, l.NS("r1"), "ip", "link", "set", "eth-ingress", "mtu", "1500")
}

// webLine is the status line the web chain must get once the uplink is
// 1500: web pushes nfv1-end, nfv2-end and egress's End.DX6, 40 + 8 + 16·3
// = 96 bytes (docs/deploy.md's table).
const webLine = "mtu: chain web at ingress: 1500 (eth-s) + 96 bytes of SRv6 headers > 1500 (eth-r1): " +
	"Linux drops packets over 1404 bytes with no Packet Too Big to their sender (docs/deploy.md)"

// TestMTUHeadroom: with the lab's MTUs (fabric 9000, hosts 1500) status
// warns of nothing; with the headend's uplink at 1500 it names each chain
// headed at ingress, the interfaces and the byte limit, in text and in -o
// json, apply warns (and succeeds), status --check still exits 0. The
// limit is the kernel's: scapy's packet from s of exactly the limit
// reaches d, one byte more does not (the headend's Ip6FragFails /
// Ip6InTooBigErrors go up).
func TestMTUHeadroom(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := newEnvFile(t, domainFile, "s16m-")
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	if st := e.mtuStatus(); len(st.MTU) != 0 || len(st.MTUNotes) != 0 {
		t.Fatalf("lab MTUs: status warns %v %v", st.MTU, st.MTUNotes)
	}
	if out := e.Must("status", "-f", domainFile, "--lab", e.Name); strings.Contains(out, "mtu:") {
		t.Fatalf("lab MTUs: status says\n%s", out)
	}

	shrinkUplink(t, e.Env)
	out := e.Must("status", "-f", domainFile, "--lab", e.Name)
	if !strings.Contains(out, webLine+"\n") {
		t.Fatalf("status does not say\n%s\n---\n%s", webLine, out)
	}
	t.Logf("status:\n%s", out[strings.Index(out, "mtu:"):])
	st := e.mtuStatus()
	var web *controller.MTUWarning
	for i, w := range st.MTU {
		if w.Node != "ingress" || w.Out != "eth-r1" || w.OutMTU != 1500 || w.In != "eth-s" || w.InMTU != 1500 {
			t.Errorf("warning %+v: want headend ingress, in eth-s 1500, out eth-r1 1500", w)
		}
		if w.Chain == "web" {
			web = &st.MTU[i]
		}
	}
	if web == nil {
		t.Fatalf("status -o json: no mtu warning for web: %+v", st.MTU)
	}
	for _, ch := range st.Chains {
		if ch.Name == "web" && web.Overhead != 40+8+16*len(ch.Hops) {
			t.Errorf("web: overhead %d, want 40 + 8 + 16·%d", web.Overhead, len(ch.Hops))
		}
	}
	if code := func() int { _, c := e.stdout("status", "-f", domainFile, "--lab", e.Name, "--check"); return c }(); code != 0 {
		t.Errorf("status --check: exit %d, want 0 (an MTU warning is not drift)", code)
	}
	if out := e.Must("apply", "-f", domainFile, "--lab", e.Name); !strings.Contains(out, "segchain: warning: "+webLine) {
		t.Errorf("apply does not warn\n%s", out)
	}

	// The oracle: the kernel's own limit at the headend.
	lens, before, after := e.limitPair(web.Limit)
	if len(lens) != 1 || lens[0] != web.Limit {
		t.Errorf("d received packets of %v bytes, want only the one of %d (the limit)", lens, web.Limit)
	}
	if after["Ip6FragFails"]-before["Ip6FragFails"] < 1 && after["Ip6InTooBigErrors"]-before["Ip6InTooBigErrors"] < 1 {
		t.Errorf("headend: neither Ip6FragFails nor Ip6InTooBigErrors went up for the %d-byte packet", web.Limit+1)
	}
}

// limitPair sends one packet of exactly limit bytes and one a byte
// longer as Ethernet frames from s through web (UDP 7000: none of the
// more specific chains) and returns the lengths d received and the
// headend's /proc/net/snmp6 before and after.
func (e *env) limitPair(limit int) (lens []int, before, after map[string]int) {
	t := e.T
	ing, s, d := e.NS("ingress"), e.NS("s"), e.NS("d")
	mac := strings.TrimSpace(testutil.Exec(t, ing, "cat", "/sys/class/net/eth-s/address"))
	script := fmt.Sprintf(`
pkts = [Ether(dst=%q)/IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=40000, dport=7000)/Raw(b"m" * (%d - 48 + i)) for i in range(2)]
sendp(pkts, iface="eth-ingress", inter=0.05, verbose=False)
`, mac, limit)
	cd := testutil.StartInboundCapture(t, d, "eth-egress", "udp and dst port 7000", 0)
	before = testutil.SNMP6(t, ing)
	testutil.RunScapyIn(t, s, script)
	atD := cd.Wait(2 * time.Second)
	after = testutil.SNMP6(t, ing)
	for _, p := range testutil.Tshark(t, atD, "ipv6.plen") {
		n, _ := strconv.Atoi(p.First("ipv6.plen"))
		lens = append(lens, n+40)
	}
	return lens, before, after
}

// TestMTUHeadroomSegments: after the headend, the chain's packets carry
// the same headers: a 1500-byte link further on is as short as the
// headend's uplink. With the fabric at 9000 except nfv1's link to r2
// (nfv1 forwards web's packets towards nfv2's SID by it), apply and
// status name nfv1 and the SID; with only r2's link to nfv2 short (r2 a
// transit router of that segment), status, which traces the path, names
// r2. Either way the kernel carries the limit and drops a byte more.
func TestMTUHeadroomSegments(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := newEnvFile(t, domainFile, "s17m-")
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	nfv2SID := ""
	for _, ch := range e.mtuStatus().Chains {
		if ch.Name == "web" && len(ch.Hops) == 3 {
			var h struct{ SID string }
			if err := json.Unmarshal(ch.Hops[1], &h); err != nil {
				t.Fatal(err)
			}
			nfv2SID = h.SID
		}
	}
	if nfv2SID == "" {
		t.Fatal("status -o json: no web chain with three hops")
	}
	for _, tc := range []struct {
		name       string
		node, peer string // the link's ends shrunk to 1500
		byApply    bool   // apply names it too (a SID's node; apply traces no path)
	}{
		{"segment node", "nfv1", "r2", true},
		{"transit router", "r2", "nfv2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setMTU := func(mtu string) {
				testutil.Exec(t, e.NS(tc.node), "ip", "link", "set", "eth-"+tc.peer, "mtu", mtu)
				testutil.Exec(t, e.NS(tc.peer), "ip", "link", "set", "eth-"+tc.node, "mtu", mtu)
			}
			setMTU("1500")
			t.Cleanup(func() { setMTU("9000") })
			line := fmt.Sprintf("mtu: chain web at %s towards %s: 1500 (eth-s at ingress) + 96 bytes of SRv6 headers > 1500 (eth-%s): "+
				"Linux drops packets over 1404 bytes with no Packet Too Big to their sender (docs/deploy.md)", tc.node, nfv2SID, tc.peer)
			if out := e.Must("status", "-f", domainFile, "--lab", e.Name); !strings.Contains(out, line+"\n") {
				t.Fatalf("status does not say\n%s\n---\n%s", line, out)
			}
			var web *controller.MTUWarning
			st := e.mtuStatus()
			for i, w := range st.MTU {
				if w.Chain == "web" {
					web = &st.MTU[i]
					if w.Node != tc.node || w.Headend != "ingress" || w.Towards.String() != nfv2SID || w.Limit != 1404 {
						t.Errorf("status -o json: %+v", w)
					}
				}
			}
			if web == nil {
				t.Fatal("status -o json: no mtu warning for web")
			}
			out := e.Must("apply", "-f", domainFile, "--lab", e.Name)
			if got := strings.Contains(out, "segchain: warning: "+line); got != tc.byApply {
				t.Errorf("apply warns of %s: %v, want %v\n%s", tc.node, got, tc.byApply, out)
			}
			if lens, _, _ := e.limitPair(1404); len(lens) != 1 || lens[0] != 1404 {
				t.Errorf("d received packets of %v bytes, want only the one of 1404 (the limit)", lens)
			}
		})
	}
}

// TestMTUHeadroomAgents: through the nodes' agents (the MTUs RPC) status
// says the same.
func TestMTUHeadroomAgents(t *testing.T) {
	e := &env{labenv.New(t, labenv.Options{File: domainFile, Prefix: "s16m-", CLI: true, Agents: true, Binary: segchainBin})}
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	if out := e.Must("status", "-f", domainFile, "--lab", e.Name); strings.Contains(out, "mtu:") {
		t.Fatalf("lab MTUs: status says\n%s", out)
	}
	shrinkUplink(t, e.Env)
	if out := e.Must("status", "-f", domainFile, "--lab", e.Name); !strings.Contains(out, webLine+"\n") {
		t.Fatalf("status does not say\n%s\n---\n%s", webLine, out)
	}
}

package pools

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPoolLocalPathSameBytes: since session 17 the headend's own packets
// of a pool's chain take a path only they pay (a rule "iif lo", a table
// whose route runs pool_local, routed again by the mark into the
// instance's table) instead of pool_out on every interface's egress. The
// same local datagrams are sent both ways and captured as they leave the
// headend towards each instance's node (scapy reads the frames): every flow
// reaches the instance the model chooses for it (its outer destination is
// that instance's SID), and each frame is byte for byte the frame the old
// path (pool_out rewriting the placeholder's list, attached on egress as
// before) delivered for the same flow.
func TestPoolLocalPathSameBytes(t *testing.T) {
	testutil.RequireTool(t, "tcpdump") // compiles the capture's filter
	testutil.RequireTool(t, "python3")
	if err := exec.Command("python3", "-c", "import scapy.all").Run(); err != nil {
		t.Skip("scapy is not installed: the frames' oracle")
	}
	e := setup(t, pool.Failover)
	ns := e.NS("ingress")
	local := addrOn(t, ns, "eth-s")
	// The sockets' automatic flow labels come from a random hash per
	// socket (sk_txhash), so the same flow sent twice differs in its
	// label (the encap copies it into the outer header) whatever the
	// path: labels 0 make the two sends comparable.
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.auto_flowlabels=0").CombinedOutput(); err != nil {
		t.Fatalf("auto_flowlabels: %v: %s", err, out)
	}
	flows := ports(29000, 30)
	nodes := []string{"nfv1", "nfv2", "nfv3"}
	send := func() map[string]string { // capture file per node
		t.Helper()
		capts := map[string]*testutil.Capture{}
		for _, n := range nodes {
			capts[n] = testutil.StartCapture(t, ns, "eth-"+n, "ip6 and ip6[6] == 43", 0)
		}
		base := map[int]int{}
		for _, p := range flows {
			base[p] = e.rcv.count(p)
		}
		for _, p := range flows {
			if err := nsutil.Do(ns, func() error {
				c, err := net.DialUDP("udp6", &net.UDPAddr{IP: local.AsSlice(), Port: p}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte("local datagram " + strconv.Itoa(p)))
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		// A bound on the wait for a loaded host, not a timing assertion.
		deadline := time.Now().Add(30 * time.Second)
		for _, p := range flows {
			for e.rcv.count(p) <= base[p] && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if e.rcv.count(p) <= base[p] {
				t.Fatalf("local flow %d never reached d", p)
			}
		}
		out := map[string]string{}
		for n, c := range capts {
			out[n] = c.Wait(0) // every frame left before its datagram reached d
		}
		return out
	}
	// frames reads each capture: per inner source port of the test's
	// flows (inner UDP to dport), the frame's bytes and outer destination.
	type frame struct{ node, hex, dst string }
	frames := func(files map[string]string) map[int]frame {
		t.Helper()
		got := map[int]frame{}
		for n, f := range files {
			out, err := exec.Command("python3", "-c", `
import sys
from scapy.all import rdpcap, IPv6, UDP, raw
for p in rdpcap(sys.argv[1]):
    if IPv6 in p and UDP in p and p[UDP].dport == int(sys.argv[2]):
        print(p[UDP].sport, p[IPv6].dst, raw(p).hex())
`, f, strconv.Itoa(dport)).CombinedOutput()
			if err != nil {
				t.Fatalf("scapy on %s: %v: %s", f, err, out)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				fs := strings.Fields(l)
				if len(fs) != 3 {
					continue
				}
				p, _ := strconv.Atoi(fs[0])
				if _, dup := got[p]; dup {
					t.Fatalf("flow %d captured twice (%s and %s)", p, got[p].node, n)
				}
				got[p] = frame{node: n, dst: fs[1], hex: fs[2]}
			}
		}
		return got
	}

	now := frames(send())
	for _, p := range flows {
		f := pool.Flow{Src: local, Dst: dstAddr, Sport: uint16(p), Dport: dport, Proto: 17}
		d := e.pool.Decide(e.pool.AllLive(), f.Hash(e.pool.Symmetric))
		want := e.pool.Instances[d.Instance].SID.String()
		if got, ok := now[p]; !ok || got.dst != want || got.node != nodes[d.Instance] {
			t.Errorf("local flow %d: reached %s with outer destination %s, want %s's SID %s", p, got.node, got.dst, nodes[d.Instance], want)
		}
	}

	// The old path: the chain's local table emptied (its rule then finds
	// no route and the chain's own rule pushes the placeholder's list),
	// pool_out on every interface's egress, as Open attached it before.
	specs, err := datapath.Specs(ns)
	if err != nil || len(specs) != 1 {
		t.Fatalf("recorded pools %v (%v)", specs, err)
	}
	tbl := datapath.Mark(specs[0].Chains[0].Rule.Table, datapath.MarkLocal)
	if out, err := exec.Command("ip", "-n", ns, "-6", "route", "flush", "table", strconv.FormatUint(uint64(tbl), 10)).CombinedOutput(); err != nil {
		t.Fatalf("flush the local table: %v: %s", err, out)
	}
	err = nsutil.Do(ns, func() error {
		h, err := datapath.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback != 0 {
				continue
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: h.Prog(), Attach: ebpf.AttachTCXEgress})
			if err != nil {
				return fmt.Errorf("attach pool_out to %s: %w", i.Name, err)
			}
			t.Cleanup(func() { l.Close() })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	old := frames(send())
	for _, p := range flows {
		if old[p].hex == "" {
			t.Errorf("local flow %d: no frame on the old path", p)
			continue
		}
		if now[p] != old[p] {
			t.Errorf("local flow %d: the new path's frame differs from the old path's:\n new %s %s\n old %s %s", p, now[p].node, now[p].hex, old[p].node, old[p].hex)
		}
	}
}

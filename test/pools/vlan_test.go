package pools

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPoolVLANTags: VLAN tags as this kernel carries them (it has no VLAN
// device type). A tagged frame sent into a veth is untagged by the core
// receive path before tc, the tag kept as skb metadata (vlan_tci); the
// selector does not look at that tag (docs/pools.md, "Limits"):
//
//   - priority-tagged frames (VID 0) from s: the receive path clears the
//     tag, and the chain steers them as untagged frames: every flow
//     arrives, on the instance the model says;
//   - frames with VID 100 from s: the headend has no VLAN device for it,
//     so the kernel drops them before routing (PACKET_OTHERHOST): none
//     reaches the chain or the selector (a priority-tagged frame sent
//     after them arrives, and the counters moved by it alone);
//   - a tag in the skb's metadata when the selector runs (pushed as
//     metadata by a program ahead of it on the headend's egress): the
//     selector steers the frame as an untagged one, and the frame keeps
//     its tag when re-routed to another interface (tcpdump, which puts
//     the metadata tag back into the frame, and tshark on the instance's
//     side).
func TestPoolVLANTags(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := setup(t, pool.Failover)
	// Neighbours on every path resolved by plain traffic first.
	e.send(ports(26500, 30))

	var ingMAC string
	if err := nsutil.Do(e.NS("ingress"), func() error {
		i, err := net.InterfaceByName("eth-s")
		if err == nil {
			ingMAC = i.HardwareAddr.String()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// scapyTagged sends one UDP datagram per port from s, tagged vid
	// (priority 5), then a priority-tagged marker from port marker (0:
	// none), in one burst on s's link to the headend.
	scapyTagged := func(vid int, ps []int, marker int) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "fr = []\n")
		frame := func(vid, p int) string {
			return fmt.Sprintf("Ether(dst=%q)/Dot1Q(vlan=%d, prio=5)/IPv6(src=%q, dst=%q)/UDP(sport=%d, dport=%d)/Raw(b'tagged')",
				ingMAC, vid, srcAddr, dstAddr, p, dport)
		}
		for _, p := range ps {
			fmt.Fprintf(&b, "fr.append(%s)\n", frame(vid, p))
		}
		if marker != 0 {
			fmt.Fprintf(&b, "fr.append(%s)\n", frame(0, marker))
		}
		fmt.Fprintf(&b, "sendp(fr, iface='eth-ingress', verbose=False)\n")
		testutil.RunScapyIn(t, e.NS("s"), b.String())
	}
	waitPorts := func(ps []int, base map[int]int) bool {
		deadline := time.Now().Add(5 * time.Second)
		for {
			all := true
			for _, p := range ps {
				if e.rcv.count(p) <= base[p] {
					all = false
				}
			}
			if all || time.Now().After(deadline) {
				return all
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	baseOf := func(ps []int) map[int]int {
		m := map[int]int{}
		for _, p := range ps {
			m[p] = e.rcv.count(p)
		}
		return m
	}

	// Priority-tagged (VID 0): steered as untagged.
	prio := ports(26000, 30)
	s0 := e.stats()
	scapyTagged(0, prio, 0)
	if !waitPorts(prio, baseOf(nil)) {
		t.Fatalf("priority-tagged flows did not all reach d")
	}
	sent := map[int]int{}
	for _, p := range prio {
		sent[p] = 1
	}
	if got, want := delta(s0, e.stats()), e.expect(sent, e.pool.AllLive(), nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("priority-tagged: instances got %v packets, model %v", got, want)
	}

	// VID 100: dropped by the kernel before routing; the marker after
	// them arrives.
	tagged, marker := ports(26100, 20), 26199
	base := baseOf(append(tagged, marker))
	s1 := e.stats()
	scapyTagged(100, tagged, marker)
	if !waitPorts([]int{marker}, base) {
		t.Fatalf("the priority-tagged marker after the VID 100 frames never reached d")
	}
	for _, p := range tagged {
		if e.rcv.count(p) != base[p] {
			t.Errorf("a VID 100 frame (port %d) reached d: the headend has no VLAN device for it", p)
		}
	}
	if got, want := delta(s1, e.stats()), e.expect(map[int]int{marker: 1}, e.pool.AllLive(), nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("VID 100: instances got %v packets, want the marker's alone %v", got, want)
	}

	// A tag in the metadata at the selector.
	pushVLANMetadata(t, e.NS("ingress"), "eth-nfv1", "eth-nfv2", "eth-nfv3")
	fw2SID := e.pool.Instances[1].SID
	pcap := startTcpdump(t, e.NS("nfv2"), "eth-ingress", "vlan and ip6", 5)
	meta := ports(26200, 30)
	s2 := e.stats()
	sent = e.send(meta)
	if got, want := delta(s2, e.stats()), e.expect(sent, e.pool.AllLive(), nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("metadata tag: instances got %v packets, model %v (the selector must steer them as untagged)", got, want)
	}
	if want := e.expect(sent, e.pool.AllLive(), nil); want[1] == 0 {
		t.Fatalf("no flow of %d went to fw2: nothing re-routed to look at", len(meta))
	}
	// Every tagged frame (ND from ingress too): the pool's are the SRv6
	// ones, all to fw2 and tagged as pushed.
	srv6 := 0
	for _, p := range testutil.Tshark(t, pcap(), "vlan.id", "vlan.priority", "ipv6.nxt", "ipv6.dst") {
		if p.First("ipv6.nxt") != "43" {
			continue
		}
		srv6++
		if p.First("vlan.id") != "0" || p.First("vlan.priority") != "3" || p.First("ipv6.dst") != fw2SID.String() {
			t.Errorf("frame at fw2: vlan id %q priority %q dst %q, want id 0 priority 3 dst %s", p.First("vlan.id"), p.First("vlan.priority"), p.First("ipv6.dst"), fw2SID)
		}
	}
	if srv6 == 0 {
		t.Error("tcpdump on nfv2 saw no tagged SRv6 frame: the frames re-routed to fw2 lost their tag")
	}
}

// pushVLANMetadata attaches, ahead of the selector on egress of ifaces in
// ns, a program that puts a priority tag (VID 0, priority 3) into the
// skb's metadata when it has none (bpf_skb_vlan_push on an untagged skb
// sets vlan_tci; the frame's bytes are unchanged). A receiver clears a
// VID 0 tag, so the chain still works. Detached at the end of the test.
func pushVLANMetadata(t *testing.T, ns string, ifaces ...string) {
	t.Helper()
	const vlanPresent = 20 // offsetof(struct __sk_buff, vlan_present)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "s11_vlan_push", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, vlanPresent, asm.Word),
			asm.JNE.Imm(asm.R2, 0, "next"),
			asm.Mov.Imm(asm.R2, 0x0081), // htons(ETH_P_8021Q)
			asm.Mov.Imm(asm.R3, 3<<13),  // priority 3, VID 0
			asm.FnSkbVlanPush.Call(),
			asm.Mov.Imm(asm.R0, -1).WithSymbol("next"), // TCX_NEXT: the selector runs
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("load the vlan push program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	for _, ifname := range ifaces {
		err := nsutil.Do(ns, func() error {
			i, err := net.InterfaceByName(ifname)
			if err != nil {
				return err
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: prog, Attach: ebpf.AttachTCXEgress, Anchor: link.Head()})
			if err != nil {
				return err
			}
			t.Cleanup(func() { l.Close() })
			return nil
		})
		if err != nil {
			t.Fatalf("attach the vlan push program to %s: %v", ifname, err)
		}
	}
}

// startTcpdump captures count packets matching filter on iface in ns with
// tcpdump (libpcap puts a metadata VLAN tag back into the frame; the
// test's own AF_PACKET capture does not). It returns once tcpdump
// listens; the returned function waits for it and gives the pcap's path.
func startTcpdump(t *testing.T, ns, iface, filter string, count int) func() string {
	t.Helper()
	testutil.RequireTool(t, "tcpdump")
	path := t.TempDir() + "/vlan.pcap"
	cmd := exec.Command("ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-Q", "in", "-U", "-c", fmt.Sprint(count), "-w", path, filter)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "listening on") {
		n, err := stderr.Read(buf)
		if err != nil {
			t.Fatalf("tcpdump: %v: %s", err, got.String())
		}
		got.Write(buf[:n])
	}
	return func() string {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("tcpdump: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tcpdump on %s saw fewer than %d tagged frames in 10 s", iface, count)
		}
		return path
	}
}

package srunaware

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestTCXNext: traffic that is not the proxy's must reach the next program
// of the TCX chain (the SR-aware firewall shares the hook). A program that
// drops everything, attached after the proxy, must see (and drop) a ping
// crossing a proxied interface; detached, the ping goes through.
func TestTCXNext(t *testing.T) {
	testutil.RequireRoot(t)
	a := testutil.NewNetns(t, "pxa")
	b := testutil.NewNetns(t, "pxb")
	t.Cleanup(func() { _ = Remove(b) })
	testutil.Exec(t, "", "ip", "-n", a, "link", "add", "x0", "type", "veth", "peer", "x1", "netns", b)
	for _, c := range []string{"ip addr add fc00:99::1/64 dev x0 nodad", "ip link set x0 up"} {
		testutil.Exec(t, a, strings.Fields(c)...)
	}
	for _, c := range []string{"ip addr add fc00:99::2/64 dev x1 nodad", "ip link set x1 up",
		"ip link add sf0 type veth peer sf1", "ip link set sf0 up", "ip link set sf1 up"} {
		testutil.Exec(t, b, strings.Fields(c)...)
	}
	if err := (Extension{}).Add(b, netip.MustParsePrefix("fc00:2::ad/128"), "End.AD6", strings.Fields("nh6 fc00:5f::2 oif sf0 iif sf1")); err != nil {
		t.Fatal(err)
	}
	if n := testutil.TCXIngressCount(t, b, "x1"); n != 1 {
		t.Fatalf("%d programs on x1, want the proxy", n)
	}
	dst := netip.MustParseAddr("fc00:99::2")
	if err := testutil.Ping(a, dst, 3*time.Second); err != nil {
		t.Fatalf("ping through the proxied interface: %v", err)
	}

	dropAll, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* TC_ACT_SHOT */), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dropAll.Close()
	var lk link.Link
	err = nsutil.Do(b, func() error {
		i, err := net.InterfaceByName("x1")
		if err != nil {
			return err
		}
		lk, err = link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: dropAll, Attach: ebpf.AttachTCXIngress, Anchor: link.Tail()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Ping(a, dst, time.Second); err == nil {
		lk.Close()
		t.Fatal("ping answered although the program after the proxy drops everything: the proxy did not return TCX_NEXT")
	}
	lk.Close()
	if err := testutil.Ping(a, dst, 3*time.Second); err != nil {
		t.Fatalf("ping after detaching the dropper: %v", err)
	}
}

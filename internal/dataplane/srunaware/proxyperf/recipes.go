package proxyperf

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/perf"
)

// The pass-through SF of recipe k: a veth pair pxK (IFACE-OUT/IN of the
// proxy) <-> sfK whose far end forwards every packet straight back (default
// via pxK). Each crossing is one more IPv6 forward through the stack, the
// same for every recipe. On the local netns testbed sfK lives in a
// namespace of its own, as an SF in a container or another node does (and
// as the proxies' bpf_redirect_peer fast path needs, docs/proxies.md); its
// work still runs in the SUT's softirq, so its CPU time is the SUT's. A
// testbed that cannot register cleanups gets the older layout: sfK in the
// SUT, sent back by a policy rule (iif sfK -> default via pxK).

func sfNames(k int) (px, sf string) { return fmt.Sprintf("px%d", k), fmt.Sprintf("sf%d", k) }

func sfAddr(k, n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fc00:5f:%x::%x", k, n)) }

// sfHop is the SF as a next hop seen from the node, nodeHop the node as
// seen from the SF.
func sfHop(k int) netip.Addr   { return sfAddr(k, 0x98) }
func nodeHop(k int) netip.Addr { return sfSide(k, 0x99) }

func sfSide(k, n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fc00:5e:%x::%x", k, n)) }

type sfInfo struct {
	px, sf       string
	pxMAC, sfMAC net.HardwareAddr
}

// sfNetns is recipe k's SF namespace ("" on testbeds that cannot clean it
// up, see above).
func sfNetns(env *perf.Env, k int) string {
	if env.Cleanup == nil || env.Do == nil {
		return ""
	}
	return fmt.Sprintf("segperf-sf%d-%d", k, os.Getpid())
}

// setupSF builds the pass-through SF of recipe k.
func setupSF(env *perf.Env, k int) (sfInfo, error) {
	if ns := sfNetns(env, k); ns != "" {
		return setupSFNetns(env, k, ns)
	}
	px, sf := sfNames(k)
	pxMAC := net.HardwareAddr{0x02, 0x5f, 0, 0, byte(k), 1}
	sfMAC := net.HardwareAddr{0x02, 0x5f, 0, 0, byte(k), 2}
	tbl := fmt.Sprint(1000 + k)
	// Recipes are set up again for every run: start from scratch.
	for _, c := range [][]string{
		{"ip", "link", "del", px},
		{"ip", "-6", "rule", "del", "priority", fmt.Sprint(100 + k)},
		{"ip", "-6", "rule", "del", "priority", fmt.Sprint(100 + k)},
		{"ip", "-6", "route", "flush", "table", tbl},
		{"ip", "-6", "route", "flush", "table", fmt.Sprint(2000 + k)},
	} {
		_, _ = env.Run(c...)
	}
	cmds := [][]string{
		{"ip", "link", "add", px, "address", pxMAC.String(), "type", "veth", "peer", sf, "address", sfMAC.String()},
		{"sysctl", "-qw", "net.ipv6.conf." + px + ".forwarding=1"},
		{"sysctl", "-qw", "net.ipv6.conf." + sf + ".forwarding=1"},
		{"ip", "link", "set", px, "up"},
		{"ip", "link", "set", sf, "up"},
		{"ip", "-6", "addr", "add", sfAddr(k, 1).String() + "/64", "dev", px, "nodad"},
		// A prefix of its own: with one /64 on both ends, lookups of the
		// SF's next hop could leave through sfK.
		{"ip", "-6", "addr", "add", sfSide(k, 2).String() + "/64", "dev", sf, "nodad"},
		// Both ends live in one namespace, so next hops are addresses
		// nobody owns, resolved by permanent neighbour entries.
		{"ip", "-6", "neigh", "replace", sfHop(k).String(), "lladdr", sfMAC.String(), "dev", px, "nud", "permanent"},
		{"ip", "-6", "neigh", "replace", nodeHop(k).String(), "lladdr", pxMAC.String(), "dev", sf, "nud", "permanent"},
		// The SF: whatever enters sfK goes back out of sfK to the node.
		{"ip", "-6", "route", "replace", "default", "via", nodeHop(k).String(), "dev", sf, "table", tbl},
		{"ip", "-6", "rule", "add", "iif", sf, "lookup", tbl, "priority", fmt.Sprint(100 + k)},
	}
	for _, c := range cmds {
		if out, err := env.Run(c...); err != nil {
			return sfInfo{}, fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return sfInfo{px, sf, pxMAC, sfMAC}, nil
}

// Recipes are the proxy behaviours and their baselines for `segchain perf`:
//
//	End.AD, End.AS, End.AM   segchain's eBPF proxies with a pass-through SF
//	End+SF                   native End, then the same SF as a transit hop
//	End.DX6+H.Encaps         stock Linux: End.DX6 to the SF, H.Encaps by a
//	                         policy route on the way back
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("End.AD", "eBPF dynamic proxy (End.AD6) in front of a pass-through SF", func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
			return proxyRecipe(env, k, p, "End.AD6", "")
		}),
		perf.NewRecipe("End.AS", "eBPF static proxy (End.AS inner ipv6) in front of a pass-through SF", func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
			return proxyRecipe(env, k, p, "End.AS", "inner ipv6 src "+perf.SUTOut6+" segs "+perf.Addr("far", k, 1).String())
		}),
		perf.NewRecipe("End.AM", "eBPF masquerading proxy in front of a pass-through SF (SRH kept)", func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
			return proxyRecipe(env, k, p, "End.AM", "")
		}),
		perf.NewRecipe("End.AD.usid", "End.AD6 on an F3216 uSID in the middle of a container (no SRH): the way back shifts it (docs/usid.md)", adUSID),
		perf.NewRecipe("End+SF", "native End, then the pass-through SF as a transit hop (proxy baseline)", endSF),
		perf.NewRecipe("End.DX6+H.Encaps", "stock Linux proxy: End.DX6 to the SF, H.Encaps by policy route back", dx6Encaps),
	}
}

func proxyRecipe(env *perf.Env, k int, p perf.Params, behavior, extra string) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("the eBPF proxies need the SUT's namespace: %w", srunaware.ErrNotSupported)
	}
	sf, err := setupSF(env, k)
	if err != nil {
		return nil, err
	}
	sid := netip.PrefixFrom(perf.Addr("sid", k, 1), 128)
	params := strings.Fields("mac " + sf.sfMAC.String() + " oif " + sf.px + " iif " + sf.px + " " + extra)
	spec, err := srunaware.ParseSpec(sid, behavior, params)
	if err != nil {
		return nil, err
	}
	if err := installSID(env, sid, spec); err != nil {
		return nil, err
	}
	src := netip.MustParseAddr(perf.TesterTx6)
	inner := ipv6(src, perf.Addr("dst", k, 1), 17, udp(p.Size-48))
	if behavior == "End.AM" {
		// Insert mode: the SRH sits on the original packet.
		list := []netip.Addr{perf.Addr("dst", k, 1), sid.Addr()}
		return eth(env, ipv6(src, sid.Addr(), 43, srh(17, list, 1, udp(p.Size-48)))), nil
	}
	list := []netip.Addr{perf.Addr("far", k, 1), sid.Addr()}
	return eth(env, ipv6(src, sid.Addr(), 43, srh(41, list, 1, inner))), nil
}

// endSF: native End, DA becomes a destination routed through the SF;
// packets coming back from the SF (iif pxK) are routed to the rx port.
func endSF(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	sf, err := setupSF(env, k)
	if err != nil {
		return nil, err
	}
	dst := perf.Addr("dst", k, 2)
	tbl := fmt.Sprint(2000 + k)
	cmds := [][]string{
		{"ip", "-6", "route", "replace", perf.Addr("sid", k, 1).String() + "/128", "encap", "seg6local", "action", "End", "dev", env.In},
		{"ip", "-6", "route", "replace", dst.String() + "/128", "via", sfHop(k).String(), "dev", sf.px},
		{"ip", "-6", "route", "replace", dst.String() + "/128", "via", perf.TesterRx6, "dev", env.Out, "table", tbl},
		{"ip", "-6", "rule", "add", "iif", sf.px, "lookup", tbl, "priority", fmt.Sprint(100 + k)},
	}
	if err := runAll(env, cmds); err != nil {
		return nil, err
	}
	src := netip.MustParseAddr(perf.TesterTx6)
	inner := ipv6(src, perf.Addr("dst", k, 1), 17, udp(p.Size-48))
	list := []netip.Addr{dst, perf.Addr("sid", k, 1)}
	return eth(env, ipv6(src, perf.Addr("sid", k, 1), 43, srh(41, list, 1, inner))), nil
}

// dx6Encaps: End.DX6 hands the inner packet to the SF; what comes back on
// pxK is encapsulated by a seg6 route of a policy table.
func dx6Encaps(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	sf, err := setupSF(env, k)
	if err != nil {
		return nil, err
	}
	tbl := fmt.Sprint(2000 + k)
	far := perf.Addr("far", k, 1)
	cmds := [][]string{
		{"ip", "-6", "route", "replace", perf.Addr("sid", k, 1).String() + "/128", "encap", "seg6local", "action", "End.DX6", "nh6", sfHop(k).String(), "dev", sf.px},
		{"ip", "-6", "route", "replace", "default", "encap", "seg6", "mode", "encap", "segs", far.String(), "dev", env.Out, "table", tbl},
		// After the encapsulation the new DA is looked up with the same
		// iif, hence in this table again: route it out, or it loops.
		{"ip", "-6", "route", "replace", "fc00:b00::/32", "via", perf.TesterRx6, "dev", env.Out, "table", tbl},
		{"ip", "-6", "rule", "add", "iif", sf.px, "lookup", tbl, "priority", fmt.Sprint(100 + k)},
	}
	if err := runAll(env, cmds); err != nil {
		return nil, err
	}
	src := netip.MustParseAddr(perf.TesterTx6)
	inner := ipv6(src, perf.Addr("dst", k, 1), 17, udp(p.Size-48))
	list := []netip.Addr{perf.Addr("sid", k, 1)}
	return eth(env, ipv6(src, perf.Addr("sid", k, 1), 43, srh(41, list, 0, inner))), nil
}

// setupSFNetns builds the SF of recipe k in namespace ns (created here,
// deleted when the testbed goes down).
func setupSFNetns(env *perf.Env, k int, ns string) (sfInfo, error) {
	px, sf := sfNames(k)
	pxMAC := net.HardwareAddr{0x02, 0x5f, 0, 0, byte(k), 1}
	sfMAC := net.HardwareAddr{0x02, 0x5f, 0, 0, byte(k), 2}
	// Recipes are set up again for every run: start from scratch.
	for _, c := range [][]string{
		{"ip", "link", "del", px},
		{"ip", "-6", "rule", "del", "priority", fmt.Sprint(100 + k)},
		{"ip", "-6", "route", "flush", "table", fmt.Sprint(2000 + k)},
	} {
		_, _ = env.Run(c...)
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return sfInfo{}, fmt.Errorf("ip netns add %s: %w: %s", ns, err, out)
	}
	env.Cleanup(func() error { return exec.Command("ip", "netns", "del", ns).Run() })
	cmds := [][]string{
		{"ip", "link", "add", px, "address", pxMAC.String(), "type", "veth", "peer", sf, "address", sfMAC.String(), "netns", ns},
		{"sysctl", "-qw", "net.ipv6.conf." + px + ".forwarding=1"},
		{"ip", "link", "set", px, "up"},
		{"ip", "-6", "addr", "add", sfAddr(k, 1).String() + "/64", "dev", px, "nodad"},
		// Next hops are addresses nobody owns, resolved by permanent
		// neighbour entries (no ND in the measurement).
		{"ip", "-6", "neigh", "replace", sfHop(k).String(), "lladdr", sfMAC.String(), "dev", px, "nud", "permanent"},
	}
	if err := runAll(env, cmds); err != nil {
		return sfInfo{}, err
	}
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "set", sf, "up"},
		{"ip", "-6", "addr", "add", sfSide(k, 2).String() + "/64", "dev", sf, "nodad"},
		{"ip", "-6", "neigh", "replace", nodeHop(k).String(), "lladdr", pxMAC.String(), "dev", sf, "nud", "permanent"},
		// The SF: whatever enters sfK goes back out of sfK to the node.
		{"ip", "-6", "route", "replace", "default", "via", nodeHop(k).String(), "dev", sf},
	} {
		full := append([]string{"netns", "exec", ns}, c...)
		if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
			return sfInfo{}, fmt.Errorf("%s (netns %s): %w: %s", strings.Join(c, " "), ns, err, out)
		}
	}
	return sfInfo{px, sf, pxMAC, sfMAC}, nil
}

func runAll(env *perf.Env, cmds [][]string) error {
	for _, c := range cmds {
		if out, err := env.Run(c...); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

func eth(env *perf.Env, l3 []byte) []byte {
	b := append(append([]byte{}, env.InMAC...), env.TxMAC...)
	return append(append(b, 0x86, 0xdd), l3...)
}

func ipv6(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// srh builds an SRH (list in Segment List order) followed by payload.
func srh(nh uint8, list []netip.Addr, sl uint8, payload []byte) []byte {
	b := []byte{nh, uint8(2 * len(list)), 4, sl, uint8(len(list) - 1), 0, 0, 0}
	for _, a := range list {
		x := a.As16()
		b = append(b, x[:]...)
	}
	return append(b, payload...)
}

// udp is a UDP header + payload of n bytes (checksum 0 is invalid for IPv6,
// but nothing on the path verifies it).
func udp(n int) []byte {
	if n < 0 {
		n = 0
	}
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint16(b[0:], 1024)
	binary.BigEndian.PutUint16(b[2:], 9)
	binary.BigEndian.PutUint16(b[4:], uint16(8+n))
	return b
}

// adUSID is End.AD's arm with a uSID (issue 31): the SID fcbb:bb00:3kk::
// (usid 32/16), the packet's DA the container SID:f004:f005 with the inner
// packet right after the IPv6 header; the way back sends it on with
// fcbb:bb00:f004:f005::, routed to the rx port. Same inner packet and
// SF as End.AD's arm, 104 bytes less of outer headers.
func adUSID(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("the eBPF proxies need the SUT's namespace: %w", srunaware.ErrNotSupported)
	}
	sf, err := setupSF(env, k)
	if err != nil {
		return nil, err
	}
	if err := runAll(env, [][]string{{"ip", "-6", "route", "replace", "fcbb:bb00:f000::/36", "via", perf.TesterRx6, "dev", env.Out}}); err != nil {
		return nil, err
	}
	me := netip.MustParseAddr(fmt.Sprintf("fcbb:bb00:%x::", 0x3000+k))
	sid := netip.PrefixFrom(me, 128)
	params := strings.Fields("mac " + sf.sfMAC.String() + " oif " + sf.px + " iif " + sf.px + " usid 32/16")
	spec, err := srunaware.ParseSpec(sid, "End.AD6", params)
	if err != nil {
		return nil, err
	}
	if err := installSID(env, sid, spec); err != nil {
		return nil, err
	}
	src := netip.MustParseAddr(perf.TesterTx6)
	inner := ipv6(src, perf.Addr("dst", k, 1), 17, udp(p.Size-48))
	da := netip.MustParseAddr(fmt.Sprintf("fcbb:bb00:%x:f004:f005::", 0x3000+k))
	return eth(env, ipv6(src, da, 41, inner)), nil
}

// installSID installs the proxy SID spec in the SUT's namespace, replacing
// a previous run's instance: removing the last SID tears the pins down, so
// the node is opened again before adding.
func installSID(env *perf.Env, sid netip.Prefix, spec srunaware.Spec) error {
	return env.Do(func() error {
		n, err := srunaware.Open("")
		if err != nil {
			return err
		}
		if _, err := n.Del(sid); err != nil {
			n.Close()
			return err
		}
		n.Close()
		if n, err = srunaware.Open(""); err != nil {
			return err
		}
		defer n.Close()
		return n.Add(spec)
	})
}

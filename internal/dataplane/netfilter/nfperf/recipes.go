package nfperf

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/perf"
)

// Table is the nftables table the recipes put their rules in (inet
// family: one forward base chain for IPv4 and IPv6).
const Table = "segperf_nf"

// Recipes are End.AN.NF's recipes for `segchain perf`. Each arm's packets
// cross N non-matching nftables rules (the experiment's rule count; 0: the
// hooks run with no rule) on the forward hook: a base chain jumps on the
// destination prefix of the arm's inner/forwarded packet (fc00:100:K::/48)
// to the arm's own chain of N rules `udp dport 10000+i drop` (the test
// packets go to port 5000). Several rule counts share one run (sandwich
// interleaving), so each arm has a chain of its own; every forwarded
// packet of the run also pays for the one base chain.
//
//	End.AN.NF        the inner IPv6 packet of an SRv6 packet (SRH: SID,
//	                 final destination; SL 1) through netfilter, then End
//	End.AN.NF-ipv4   the same with an IPv4 inner packet
//	End+nft          native seg6local End; netfilter sees the outer packet
//	End.DX6+nft+H.Encaps  stock Linux: decapsulate, forward the inner packet
//	                 through a veth pair, re-encapsulate by route (see
//	                 dx6Loop; the research's End.DT4 + H.Encaps)
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("End.AN.NF", "segchain End.AN.NF: the inner IPv6 packet through netfilter (N nft rules), then End", func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
			return anf(env, k, p, false)
		}),
		perf.NewRecipe("End.AN.NF-ipv4", "segchain End.AN.NF with an IPv4 inner packet (N nft rules)", func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
			return anf(env, k, p, true)
		}),
		perf.NewRecipe("End.AN.NF.usid", "End.AN.NF on an F3216 uSID in the middle of a container (no SRH), N nft rules: End shifts it (docs/usid.md)", anfUSID),
		withRules("End+nft", "seg6local End, the forwarded packet crossing N nft rules", "End"),
		perf.NewRecipe("End.DX6+nft+H.Encaps", "stock Linux: End.DX6 decapsulates into a veth pair whose far end's route re-encapsulates (seg6 mode encap); the inner packet crosses N nft rules", dx6Loop),
	}
}

// dx6Loop is stock Linux's way to let netfilter's FORWARD and POSTROUTING
// hooks see the inner packet of SRv6 traffic and send it on encapsulated
// (the research's End.DT4 + H.Encaps; End.DT4 needs VRF, absent here). A
// seg6 encap route encapsulates on input, before FORWARD, so the inner
// packet must be forwarded once as itself first: End.DX6 sends it out of
// veth sc-nfb<K> (FORWARD, POSTROUTING), it comes in on sc-nfb<K>i
// (PREROUTING), where "iif sc-nfb<K>i lookup 500+K" finds a default seg6
// encap route (1 SID: far K,1), and the outer packet is forwarded to the
// rx port. The packet crosses one veth, as End.AN.NF's does.
func dx6Loop(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	a, b := fmt.Sprintf("sc-nfb%d", k), fmt.Sprintf("sc-nfb%di", k)
	nh, gw := fmt.Sprintf("fc00:c01:%x::2", k), fmt.Sprintf("fe80::5e:%x", k)
	t := fmt.Sprint(500 + k)
	if _, err := env.Run("ip", "link", "show", a); err != nil {
		if out, err := env.Run("ip", "link", "add", a, "type", "veth", "peer", "name", b); err != nil {
			return nil, fmt.Errorf("veth: %v: %s", err, out)
		}
	}
	mac, err := env.Run("cat", "/sys/class/net/"+b+"/address")
	if err != nil {
		return nil, err
	}
	cmds := [][]string{
		{"sysctl", "-qw", "net.ipv6.conf." + a + ".addr_gen_mode=1", "net.ipv6.conf." + b + ".addr_gen_mode=1"},
		{"ip", "link", "set", a, "up"},
		{"ip", "link", "set", b, "up"},
		// nh6 behind a gateway route: the neighbour is the gateway (one
		// permanent entry), not the inner destination, and no route cache
		// entry per packet (PERF-METHOD.md).
		{"ip", "-6", "neigh", "replace", gw, "lladdr", strings.TrimSpace(mac), "dev", a, "nud", "permanent"},
		{"ip", "-6", "route", "replace", nh + "/128", "via", gw, "dev", a},
		{"ip", "-6", "route", "replace", "default", "encap", "seg6", "mode", "encap", "segs", perf.Addr("far", k, 1).String(), "dev", env.Out, "table", t},
		// The new DA is looked up with the same iif, so in this table
		// again: route it out, or it loops.
		{"ip", "-6", "route", "replace", "fc00:b00::/32", "via", perf.TesterRx6, "dev", env.Out, "table", t},
		{"sh", "-c", "ip -6 rule del iif " + b + " lookup " + t + " 2>/dev/null; ip -6 rule add iif " + b + " lookup " + t + " pref 98"},
		{"ip", "-6", "route", "replace", perf.Addr("sid", k, 1).String() + "/128", "encap", "seg6local", "action", "End.DX6", "nh6", nh, "dev", env.In},
	}
	for _, c := range cmds {
		if out, err := env.Run(c...); err != nil {
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	if err := Rules(env, k, perf.Addr("dst", k, 1), p.Rules); err != nil {
		return nil, err
	}
	return perf.EndFrame(env, k, p, 0, []netip.Addr{perf.Addr("far", k, 9), perf.Addr("sid", k, 1)}, false)
}

// SID is recipe k's End.AN.NF SID prefix; packets carry ARGS 0xa1.
func SID(k int) netip.Prefix { return netip.PrefixFrom(perf.Addr("sid", k, 0), 112) }

func sidAddr(k int) netip.Addr { return perf.Addr("sid", k, 0xa1) }

func anf(env *perf.Env, k int, p perf.Params, v4 bool) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("End.AN.NF needs the SUT's namespace: %w", perf.ErrNotSupported)
	}
	if err := env.Do(func() error { return netfilter.Apply("", netfilter.Instance{SID: SID(k), ArgsBits: 16}) }); err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error { return env.Do(func() error { return netfilter.Flush("") }) })
	}
	dst := perf.Addr("dst", k, 1)
	if v4 {
		dst = perf.Addr4(k, 1)
	}
	if err := Rules(env, k, dst, p.Rules); err != nil {
		return nil, err
	}
	return Frame(env, k, p, v4)
}

// Frame is the End.AN.NF recipe's packet: SRv6 (SRH: SID, final
// destination; SL 1) carrying a UDP packet to port 5000.
func Frame(env *perf.Env, k int, p perf.Params, v4 bool) ([]byte, error) {
	return perf.EndFrame(env, k, p, 1, []netip.Addr{sidAddr(k), perf.Addr("dst", k, 1)}, v4)
}

// withRules wraps stock recipe base (perf's native and baseline recipes)
// with the arm's N rules.
func withRules(name, desc, base string) perf.Recipe {
	return perf.NewRecipe(name, desc, func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
		reg, err := perf.NewRegistry(append(perf.NativeRecipes(), perf.BaselineRecipes()...)...)
		if err != nil {
			return nil, err
		}
		r, err := reg.Get(base)
		if err != nil {
			return nil, err
		}
		f, err := r.Setup(env, k, p)
		if err != nil {
			return nil, err
		}
		return f, Rules(env, k, perf.Addr("dst", k, 1), p.Rules)
	})
}

// Rules (re)creates arm k's chain of n rules, jumped to for packets to
// dst's /48 (/24 for IPv4).
func Rules(env *perf.Env, k int, dst netip.Addr, n int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n  chain forward { type filter hook forward priority 0; policy accept; }\n}\n", Table)
	chain := fmt.Sprintf("r%d", k)
	if _, err := env.Run("nft", "list", "chain", "inet", Table, chain); err == nil {
		fmt.Fprintf(&b, "flush chain inet %s %s\n", Table, chain)
	} else {
		fam, bits := "ip6", 48
		if dst.Is4() {
			fam, bits = "ip", 24
		}
		fmt.Fprintf(&b, "add chain inet %s %s\n", Table, chain)
		fmt.Fprintf(&b, "add rule inet %s forward %s daddr %s jump %s\n", Table, fam, netip.PrefixFrom(dst, bits).Masked(), chain)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "add rule inet %s %s udp dport %d drop\n", Table, chain, 10000+i%50000)
	}
	f, err := os.CreateTemp("", "segchain-nfperf-*.nft")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if out, err := env.Run("nft", "-f", f.Name()); err != nil {
		return fmt.Errorf("nft -f: %v: %s", err, out)
	}
	return nil
}

// anfUSID is End.AN.NF's arm with a uSID (issue 31): the instance
// fcbb:bb00:31kk::/48 (usid 32/16), the packet's DA the container
// SID:f004:f005 with the inner packet right after the IPv6 header (End.AN.NF's
// frame with its SRH taken out); End sends it on with fcbb:bb00:f004:f005::,
// routed to the rx port. Same inner packet and rules as End.AN.NF's arm.
func anfUSID(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("End.AN.NF needs the SUT's namespace: %w", perf.ErrNotSupported)
	}
	me := netip.MustParseAddr(fmt.Sprintf("fcbb:bb00:%x::", 0x3100+k))
	in := netfilter.Instance{SID: netip.PrefixFrom(me, 48), CSIDLBLen: 32, CSIDNFLen: 16}
	if err := env.Do(func() error { return netfilter.Apply("", in) }); err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error { return env.Do(func() error { return netfilter.Flush("") }) })
	}
	if _, err := env.Run("ip", "-6", "route", "replace", "fcbb:bb00:f000::/36", "via", perf.TesterRx6, "dev", env.Out); err != nil {
		return nil, err
	}
	if err := Rules(env, k, perf.Addr("dst", k, 1), p.Rules); err != nil {
		return nil, err
	}
	da := netip.MustParseAddr(fmt.Sprintf("fcbb:bb00:%x:f004:f005::", 0x3100+k))
	f, err := perf.EndFrame(env, k, p, 0, []netip.Addr{da}, false)
	if err != nil {
		return nil, err
	}
	// Ethernet, IPv6, an SRH of one segment (24 bytes), the inner packet:
	// the SRH goes, its Next Header (IPv6) moves into the IPv6 header.
	const eth, ip6, srh = 14, 40, 24
	if len(f) < eth+ip6+srh || f[eth+6] != 43 {
		return nil, fmt.Errorf("End.AN.NF.usid: unexpected frame from perf.EndFrame")
	}
	out := append(append([]byte(nil), f[:eth+ip6]...), f[eth+ip6+srh:]...)
	out[eth+6] = f[eth+ip6]
	pl := len(out) - eth - ip6
	out[eth+4], out[eth+5] = byte(pl>>8), byte(pl)
	return out, nil
}

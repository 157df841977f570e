package fwperf

import (
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/perf"
)

// Recipes are the firewall's recipes for `segchain perf`:
//
//	End.AN.FW  the eBPF SR-aware firewall holding N rules (the experiment's
//	           rule count, at least 1), none of which matches the test
//	           packet: `-p udp --dport 10000+i -j DROP` for i < N, the
//	           ip6tables/nftables baselines' rules; policy accept, so every
//	           packet is classified against the whole rule set and then
//	           forwarded by End (go-next). Encap mode: an SRv6 packet
//	           (SRH: far SID, firewall SID; SL 1) carrying an IPv6 UDP
//	           packet to port 9.
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("End.AN.FW", "eBPF SR-aware firewall with N non-matching rules, policy accept (End)", firewallRecipe),
	}
}

// Rules returns the recipe's n rules (exported for tests and docs).
func Rules(n int) ([]fwrule.Rule, error) {
	var out []fwrule.Rule
	for i := range n {
		r, err := fwrule.Parse([]string{"-p", "udp", "--dport", fmt.Sprint(10000 + i%50000), "-j", "DROP"}, fwrule.IPv6)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func firewallRecipe(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("the eBPF firewall needs the SUT's namespace: %w", firewall.ErrNotSupported)
	}
	n := max(p.Rules, 1)
	if n > firewall.MaxRules {
		return nil, fmt.Errorf("%d rules: at most %d: %w", n, firewall.MaxRules, firewall.ErrNotSupported)
	}
	rules, err := Rules(n)
	if err != nil {
		return nil, err
	}
	sid := netip.PrefixFrom(sidAddr(k), 112).Masked()
	in := firewall.Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: rules}
	if err := env.Do(func() error { return firewall.Apply("", in) }); err != nil {
		return nil, err
	}
	return Frame(env, k, p)
}

// Frame is the recipe's test packet: SRv6 (SRH: firewall SID, then a far
// SID; SL 1) carrying an IPv6 UDP packet (perf.EndFrame).
func Frame(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return perf.EndFrame(env, k, p, 1, []netip.Addr{sidAddr(k), perf.Addr("far", k, 1)}, false)
}

// sidAddr is the firewall SID recipe k's packets carry (ARGS 0xf1 of the
// instance's /112).
func sidAddr(k int) netip.Addr { return perf.Addr("sid", k, 0xf1) }

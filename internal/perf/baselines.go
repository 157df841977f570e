package perf

import (
	"fmt"
	"net/netip"
	"strings"
)

// BaselineRecipes returns the comparison baselines of stock Linux that
// take a rule count: plain IPv6 forwarding through N ip6tables or nftables
// rules that do not match (the linear scan the SERA work measured). Each
// recipe's rules sit in a chain of their own, jumped to only for its own
// destination prefix, so other behaviours of the same run cross one rule;
// but once netfilter hooks exist every forwarded packet pays for them, so
// measure rule counts in an experiment of their own (examples/perf/rules.yaml).
func BaselineRecipes() []Recipe {
	return []Recipe{
		nativeRecipe{"ip6tables", "IPv6 forwarding through N non-matching ip6tables FORWARD rules", func(env *Env, k int, p Params) ([]byte, error) {
			pfx := netip.PrefixFrom(Addr("dst", k, 0), 48).String()
			chain := fmt.Sprintf("SEGPERF%d", k)
			var b strings.Builder
			fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n-A FORWARD -d %s -j %s\n", chain, pfx, chain)
			for i := 0; i < p.Rules; i++ {
				fmt.Fprintf(&b, "-A %s -p udp --dport %d -j DROP\n", chain, 10000+i%50000)
			}
			b.WriteString("COMMIT\n")
			if err := runScript(env, "ip6tables-restore -n", b.String()); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			return frame6(env, in), err
		}},
		nativeRecipe{"nftables", "IPv6 forwarding through N non-matching nftables rules", func(env *Env, k int, p Params) ([]byte, error) {
			pfx := netip.PrefixFrom(Addr("dst", k, 0), 48).String()
			var b strings.Builder
			b.WriteString("table ip6 segperf {\n  chain forward { type filter hook forward priority 0; policy accept; }\n}\n")
			fmt.Fprintf(&b, "add chain ip6 segperf r%d\n", k)
			fmt.Fprintf(&b, "add rule ip6 segperf forward ip6 daddr %s jump r%d\n", pfx, k)
			for i := 0; i < p.Rules; i++ {
				fmt.Fprintf(&b, "add rule ip6 segperf r%d udp dport %d drop\n", k, 10000+i%50000)
			}
			if err := runScript(env, "nft -f -", b.String()); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			return frame6(env, in), err
		}},
	}
}

// runScript feeds script to a shell command's stdin on the SUT.
func runScript(env *Env, cmd, script string) error {
	if strings.Contains(script, "SEGPERF_EOF") {
		return fmt.Errorf("script contains the heredoc marker")
	}
	return runAll(env, []string{"sh", "-c", cmd + " <<'SEGPERF_EOF'\n" + script + "SEGPERF_EOF\n"})
}

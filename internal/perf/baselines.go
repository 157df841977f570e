package perf

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// BaselineRecipes returns the comparison baselines of stock Linux:
//
//   - plain IPv6 forwarding through N ip6tables or nftables rules that do
//     not match (the linear scan the SERA work measured). Each recipe's
//     rules sit in a chain of their own, jumped to only for its own
//     destination prefix, so other behaviours of the same run cross one
//     rule; but once netfilter hooks exist every forwarded packet pays for
//     them, so measure rule counts in an experiment of their own
//     (examples/perf/rules.yaml);
//   - decap+re-encap: the path of stock Linux in front of an SR-unaware
//     service without the service — End.DT6 decapsulates, the inner
//     packet's route encapsulates it again (seg6 mode encap, 1 SID);
//   - nfqueue: plain IPv6 forwarding through an NFQUEUE rule and an
//     accept-all userspace reader, the smallest userspace service.
//
// Setup is idempotent: the runner sets recipes up again for every run.
func BaselineRecipes() []Recipe {
	return []Recipe{
		nativeRecipe{"ip6tables", "IPv6 forwarding through N non-matching ip6tables FORWARD rules", func(env *Env, k int, p Params) ([]byte, error) {
			chain := fmt.Sprintf("SEGPERF%d", k)
			var b strings.Builder
			for i := 0; i < p.Rules; i++ {
				fmt.Fprintf(&b, "-A %s -p udp --dport %d -j DROP\n", chain, 10000+i%50000)
			}
			if err := ip6tablesChain(env, k, chain, b.String()); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			return frame6(env, in), err
		}},
		nativeRecipe{"nftables", "IPv6 forwarding through N non-matching nftables rules", func(env *Env, k int, p Params) ([]byte, error) {
			pfx := netip.PrefixFrom(Addr("dst", k, 0), 48).String()
			var b strings.Builder
			b.WriteString("table ip6 segperf {\n  chain forward { type filter hook forward priority 0; policy accept; }\n}\n")
			if _, err := env.Run("nft", "list", "chain", "ip6", "segperf", fmt.Sprintf("r%d", k)); err == nil {
				// Set up before (an earlier run): keep the jump, redo the rules.
				fmt.Fprintf(&b, "flush chain ip6 segperf r%d\n", k)
			} else {
				fmt.Fprintf(&b, "add chain ip6 segperf r%d\n", k)
				fmt.Fprintf(&b, "add rule ip6 segperf forward ip6 daddr %s jump r%d\n", pfx, k)
			}
			for i := 0; i < p.Rules; i++ {
				fmt.Fprintf(&b, "add rule ip6 segperf r%d udp dport %d drop\n", k, 10000+i%50000)
			}
			if err := runScript(env, "nft -f -", b.String()); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			return frame6(env, in), err
		}},
		nativeRecipe{"decap+re-encap", "End.DT6, then the inner packet's route re-encapsulates it (seg6 mode encap, 1 SID): stock Linux around an SR-unaware service, minus the service", decapReencap},
		&nfqueueRecipe{name: "nfqueue", readers: map[nfqKey]*nfqReader{}},
		&nfqueueRecipe{name: "nfqueue-rt", realtime: true, readers: map[nfqKey]*nfqReader{}},
	}
}

// ip6tablesChain (re)creates chain with rules (ip6tables-restore lines)
// and one FORWARD jump to it for recipe k's destinations.
func ip6tablesChain(env *Env, k int, chain, rules string) error {
	pfx := netip.PrefixFrom(Addr("dst", k, 0), 48).String()
	// Remove the jumps of an earlier setup (a second run) so that there
	// is exactly one; declaring the chain below flushes it.
	for i := 0; i < 10; i++ {
		if _, err := env.Run("ip6tables", "-D", "FORWARD", "-d", pfx, "-j", chain); err != nil {
			break
		}
	}
	script := fmt.Sprintf("*filter\n:%s - [0:0]\n-A FORWARD -d %s -j %s\n%sCOMMIT\n", chain, pfx, chain, rules)
	return runScript(env, "ip6tables-restore -n", script)
}

// decapReencap: End.DT6 looks the inner packet up in table 400+k, whose
// route for it is a seg6 encap towards a far SID; the new outer DA is
// routed (main table) to the rx port.
func decapReencap(env *Env, k int, p Params) ([]byte, error) {
	t := strconv.Itoa(400 + k)
	if err := runAll(env,
		[]string{"ip", "-6", "route", "replace", "fc00:100::/32", "encap", "seg6", "mode", "encap",
			"segs", Addr("far", k, 1).String(), "dev", env.Out, "table", t},
	); err != nil {
		return nil, err
	}
	if err := sidRoute(env, k, "End.DT6", "table", t); err != nil {
		return nil, err
	}
	return decapFrame(env, k, p, false)
}

type nfqKey struct {
	env *Env
	k   int
}

// nfqueueRecipe forwards recipe k's destinations through an ip6tables
// NFQUEUE rule (queue k; the kernel here has no nft queue expression) to
// an accept-all reader thread pinned to the SUT's CPU, whose CPU time is
// the SUT's. The kernel queue holds at most 1024 packets and drops beyond
// (no fail-open, so nothing bypasses the reader); the reader stops when
// the testbed goes down. NFQUEUE is known to livelock under overload when
// NAPI runs in softirq context on the reader's CPU; here NAPI is a
// thread, and the scheduler shares the SUT CPU between it and the reader.
// nfqueue-rt is the same with the reader SCHED_FIFO: it then runs ahead of
// the NAPI thread, as the userspace SR services' workers do with
// srv6svc.Config.Realtime (the like-for-like baseline for them).
type nfqueueRecipe struct {
	name     string
	realtime bool
	mu       sync.Mutex
	readers  map[nfqKey]*nfqReader
}

func (r *nfqueueRecipe) Name() string { return r.name }
func (r *nfqueueRecipe) Describe() string {
	if r.realtime {
		return "as nfqueue, the reader thread SCHED_FIFO (priority 1): ahead of the NAPI thread on the SUT CPU"
	}
	return "IPv6 forwarding through an NFQUEUE rule and an accept-all userspace reader (one verdict per packet)"
}

func (r *nfqueueRecipe) Setup(env *Env, k int, p Params) ([]byte, error) {
	if p.Size == 0 {
		p.Size = 64
	}
	if err := r.reader(env, k); err != nil {
		return nil, fmt.Errorf("recipe %s: %w", r.name, err)
	}
	chain := fmt.Sprintf("SEGPERFQ%d", k)
	if err := ip6tablesChain(env, k, chain, fmt.Sprintf("-A %s -j NFQUEUE --queue-num %d\n", chain, k)); err != nil {
		return nil, fmt.Errorf("recipe %s: %w", r.name, err)
	}
	in, err := plain6(src6, Addr("dst", k, 1), p.Size)
	return frame6(env, in), err
}

// reader starts recipe k's reader once per testbed.
func (r *nfqueueRecipe) reader(env *Env, k int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := nfqKey{env, k}
	if r.readers[key] != nil {
		return nil
	}
	rd, err := startNFQReader(env, uint16(k), r.realtime)
	if err != nil {
		return err
	}
	r.readers[key] = rd
	env.Cleanup(func() error {
		r.mu.Lock()
		delete(r.readers, key)
		r.mu.Unlock()
		return rd.Close()
	})
	return nil
}

// runScript feeds script to a shell command's stdin on the SUT. The script
// goes through a temporary file (the namespaces share the filesystem), not
// the command line: a single argument is capped at 128 KiB (MAX_ARG_STRLEN),
// which a few thousand rules exceed.
func runScript(env *Env, cmd, script string) error {
	f, err := os.CreateTemp("", "segchain-perf-*.rules")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return runAll(env, []string{"sh", "-c", cmd + ` < "$1"`, "sh", f.Name()})
}

// Package poolperf is the pool selector's recipes for `segchain perf`
// (docs/pools.md, docs/benchmarks.md "#29"): a chain whose first SID is a
// pool of three instances, chosen at ingress, against a single-instance
// chain in the same run, and two candidate mechanisms' kernel halves; and
// the cost run (Measure, `segchain perf pools`), which attaches the pool
// programs per arm against a headend without them.
package poolperf

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
)

// Recipes:
//
//	T.Encaps.rule  a single-instance chain as segchain installs one: an
//	               ip rule (to hx(k)::/48) into the chain's table, whose
//	               encap seg6 route pushes [far3, far2]. The baseline of
//	               the pool arms (a headend classifies chains by rules).
//	T.Encaps.pool  the same chain whose first SID is a pool of far3..far5
//	               (weight 1 each), chosen as segchain does since session
//	               12: pool_in (TCX ingress) classifies the packet by the
//	               chain's rule, chooses and marks; a rule with the chain's
//	               selectors and the mark sends it to the instance's table
//	               (its complete SID list). No rewrite, no FIB lookup.
//	T.Encaps.mark  a candidate's kernel half (session 11, markTable).
//	T.Encaps.nhgroup a candidate, not segchain's: the kernel picks one of
//	               three per-instance SID lists (nhGroup).
//
// In a `perf run` the selector stays attached to the SUT's interfaces,
// so every arm of a run (the baselines too) crosses pool_in (a classifier
// miss) and pool_out (one compare: the packets are forwarded): the ratios
// are the cost of choosing, not of having the programs; `segchain perf
// pools` (Measure) measures against a headend without them. The arms of
// one run share the SUT: each arm's pool is added to those of the arms
// set up before it. (T.Encaps.poolout, .pool1, .poolmiss, pool_out's
// rewrite of forwarded packets before session 12, went with that path:
// pool_out now lets forwarded packets pass.)
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("T.Encaps.rule", "headend: a single-instance chain as segchain installs it (ip rule into the chain's table, encap seg6 mode encap, 2 SIDs): the pool arms' baseline", setup(ruleOnly)),
		perf.NewRecipe("T.Encaps.pool", "headend: a chain (ip rule) whose first SID is a pool of 3 instances, chosen at ingress (segchain's pool_in marks, the instance's table pushes its SID list)", setup(poolIn)),
		perf.NewRecipe("T.Encaps.mark", "headend: a per-instance table's SID list chosen by skb mark (ip rule fwmark; the mark set by a TCX ingress program): the kernel's half of selecting by mark", markTable),
		perf.NewRecipe("T.Encaps.nhgroup", "headend: the kernel alone picks one of 3 per-instance SID lists (a nexthop group of encap seg6 nexthops, its own hash): the kernel's half of selecting by route", nhGroup),
	}
}

const (
	poolIn = iota
	ruleOnly
)

func setup(kind int) func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return func(env *perf.Env, k int, p perf.Params) ([]byte, error) { return setupKind(env, k, p, kind) }
}

// chainTable and chainPref are arm k's chain table and rule priority.
func chainTable(k int) int { return 1100 + k }
func chainPref(k int) int  { return 3000 + 2*k }

func setupKind(env *perf.Env, k int, p perf.Params, kind int) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("T.Encaps.pool needs the SUT's namespace here: %w", perf.ErrNotSupported)
	}
	ph := perf.Addr("far", k, 1)
	far2 := perf.Addr("far", k, 2)
	pfx := netip.PrefixFrom(perf.Addr("hx", k, 0), 48)
	// The chain as plan installs it: its rule into its table.
	lead := ph
	if kind == ruleOnly {
		lead = perf.Addr("far", k, 3)
	}
	table := fmt.Sprint(chainTable(k))
	_, _ = env.Run("ip", "-6", "rule", "del", "pref", fmt.Sprint(chainPref(k))) // a run before this one's
	for _, c := range [][]string{
		{"ip", "-6", "route", "replace", pfx.String(), "encap", "seg6", "mode", "encap", "segs", lead.String() + "," + far2.String(), "dev", env.Out, "table", table},
		{"ip", "-6", "rule", "add", "to", pfx.String(), "lookup", table, "pref", fmt.Sprint(chainPref(k))},
	} {
		if out, err := env.Run(c...); err != nil {
			return nil, fmt.Errorf("%v: %v: %s", c, err, out)
		}
	}
	if kind == ruleOnly {
		return frame(env, perf.Addr("hx", k, 1), p.Size)
	}
	pl := pool.Pool{Name: fmt.Sprintf("perf%d", k), Placeholder: ph, OnFailure: pool.Failover, AllDown: pool.Drop, Symmetric: true}
	for i := 3; i <= 5; i++ {
		pl.Instances = append(pl.Instances, pool.Instance{Name: fmt.Sprintf("far%d", i), SID: perf.Addr("far", k, i), Weight: 1})
	}
	cs := pool.ChainSel{Chain: fmt.Sprintf("perf%d", k),
		Rule:   nodestate.Rule{Family: 6, Priority: chainPref(k), Dst: pfx, Table: chainTable(k)},
		Route:  nodestate.Route{Dst: pfx, Table: chainTable(k), Dev: env.Out},
		Bypass: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{far2}}}
	for _, in := range pl.Instances {
		cs.Instances = append(cs.Instances, nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{in.SID, far2}})
	}
	sp := pool.Spec{Pool: pl, Chains: []pool.ChainSel{cs}}
	var dir string
	first := false
	err := env.Do(func() error {
		h, err := datapath.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		dir = h.Dir()
		// Program writes the whole set of pools: the arms of one run
		// share the SUT, so each arm adds its pool to those before it
		// (programming only its own removed the earlier arms' pools, and
		// their packets went out unselected: docs/benchmarks.md "#29").
		specs, known := armPools.add(dir, k, sp)
		first = !known
		pools := make([]pool.Pool, len(specs))
		for i, s := range specs {
			pools[i] = s.Pool
		}
		if err := h.Program(pools); err != nil {
			return err
		}
		// The selection at ingress as apply programs it: the instances'
		// tables and rules, then the classifier.
		return datapath.Select("", h, specs)
	})
	if err != nil {
		return nil, err
	}
	if first && env.Cleanup != nil {
		env.Cleanup(func() error {
			armPools.forget(dir)
			return env.Do(func() error { return datapath.Remove("") })
		})
	}
	return frame(env, perf.Addr("hx", k, 1), p.Size)
}

// nhGroup is a candidate mechanism's kernel half (docs/pools.md, "Why a
// TCX program"): the chain's route is a group of three nexthops, each
// with its instance's whole SID list (encap seg6), and the kernel's
// multipath hash picks one; a selector would then only set the packet's
// hash at ingress (bpf_set_hash, fib_multipath_hash_policy 1). No
// selector program is involved in this arm.
func nhGroup(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	var ids []string
	for i := 3; i <= 5; i++ {
		id := fmt.Sprint(1000*k + i)
		segs := perf.Addr("far", k, i).String() + "," + perf.Addr("far", k, 2).String()
		if out, err := env.Run("ip", "-6", "nexthop", "replace", "id", id, "encap", "seg6", "mode", "encap", "segs", segs, "dev", env.Out); err != nil {
			return nil, fmt.Errorf("nexthop %s: %v: %s: %w", id, err, out, perf.ErrNotSupported)
		}
		ids = append(ids, id)
	}
	gid := fmt.Sprint(1000 * k)
	if out, err := env.Run("ip", "nexthop", "replace", "id", gid, "group", strings.Join(ids, "/")); err != nil {
		return nil, fmt.Errorf("nexthop group: %v: %s", err, out)
	}
	pfx := netip.PrefixFrom(perf.Addr("hx", k, 0), 48).String()
	if out, err := env.Run("ip", "-6", "route", "replace", pfx, "nhid", gid); err != nil {
		return nil, fmt.Errorf("headend route: %v: %s", err, out)
	}
	return frame(env, perf.Addr("hx", k, 1), p.Size)
}

// markTable is another candidate's kernel half: an ingress program marks
// the arm's packets (what a selector would do after choosing) and an ip
// rule sends marked packets to a table holding the chosen instance's
// encap route. The rule is walked by every route lookup of the SUT, the
// other arms' too, so the arm understates the mechanism's cost.
func markTable(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil || env.Cleanup == nil {
		return nil, fmt.Errorf("T.Encaps.mark needs the SUT's namespace here: %w", perf.ErrNotSupported)
	}
	mark, table := 0x29000+k, fmt.Sprint(2900+k)
	segs := perf.Addr("far", k, 3).String() + "," + perf.Addr("far", k, 2).String()
	pfx := netip.PrefixFrom(perf.Addr("hx", k, 0), 48)
	_, _ = env.Run("ip", "-6", "rule", "del", "pref", fmt.Sprint(2900+k)) // a run before this one's
	for _, c := range [][]string{
		{"ip", "-6", "route", "replace", pfx.String(), "encap", "seg6", "mode", "encap", "segs", segs, "dev", env.Out, "table", table},
		{"ip", "-6", "route", "replace", "fc00:b00::/32", "via", perf.TesterRx6, "dev", env.Out, "table", table},
		{"ip", "-6", "rule", "add", "fwmark", fmt.Sprint(mark), "lookup", table, "pref", fmt.Sprint(2900 + k)},
	} {
		if out, err := env.Run(c...); err != nil {
			return nil, fmt.Errorf("%v: %v: %s", c, err, out)
		}
	}
	// The mark: packets to hx(k)::/48 (bytes 38..41 of the frame
	// fc00:0200, 42..43 k, big endian), read directly.
	dst := pfx.Addr().As16()
	w0 := int32(binary.LittleEndian.Uint32(dst[0:4]))
	w1 := int32(binary.LittleEndian.Uint16(dst[4:6]))
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "perf_pool_mark", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 76, asm.Word), // skb->data
			asm.LoadMem(asm.R3, asm.R1, 80, asm.Word), // skb->data_end
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, 44),
			asm.JGT.Reg(asm.R4, asm.R3, "next"),
			asm.LoadMem(asm.R5, asm.R2, 38, asm.Word),
			asm.JNE.Imm(asm.R5, w0, "next"),
			asm.LoadMem(asm.R5, asm.R2, 42, asm.Half),
			asm.JNE.Imm(asm.R5, w1, "next"),
			asm.Mov.Imm(asm.R5, int32(mark)),
			asm.StoreMem(asm.R1, 8, asm.R5, asm.Word), // skb->mark
			asm.Mov.Imm(asm.R0, -1).WithSymbol("next"),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mark program: %w", err)
	}
	var l link.Link
	err = env.Do(func() error {
		i, err := net.InterfaceByName(env.In)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		return err
	})
	prog.Close()
	if err != nil {
		return nil, fmt.Errorf("attach the mark program: %w", err)
	}
	env.Cleanup(func() error { return l.Close() })
	return frame(env, perf.Addr("hx", k, 1), p.Size)
}

// armPools holds the pools the arms programmed per SUT (its pin dir).
var armPools = &sutPools{by: map[string]map[int]pool.Spec{}}

type sutPools struct {
	mu sync.Mutex
	by map[string]map[int]pool.Spec
}

// add records recipe k's pool on the SUT whose selector pins at dir and
// returns every pool of that SUT (in recipe order) and whether the SUT
// had pools before.
func (s *sutPools) add(dir string, k int, p pool.Spec) ([]pool.Spec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, known := s.by[dir]
	if !known {
		m = map[int]pool.Spec{}
		s.by[dir] = m
	}
	m[k] = p
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	out := make([]pool.Spec, 0, len(ks))
	for _, k := range ks {
		out = append(out, m[k])
	}
	return out, known
}

func (s *sutPools) forget(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, dir)
}

// frame is a UDP/IPv6 packet of size bytes from the tester's tx port,
// the same as T.Encaps's (perf's plain6: payload bytes i, a valid UDP
// checksum), so that the arms differ from the baseline by the selector
// alone. (Until session 11 these frames had a zero checksum and payload;
// measured in one run against the new frame it made no difference beyond
// the noise: docs/benchmarks.md "#29".)
func frame(env *perf.Env, dst netip.Addr, size int) ([]byte, error) {
	if size < 48 {
		return nil, fmt.Errorf("IPv6 packet size %d < 48", size)
	}
	b := make([]byte, 14+size)
	copy(b, env.InMAC)
	copy(b[6:], env.TxMAC)
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(size-40))
	ip[6], ip[7] = 17, 64
	s, d := netip.MustParseAddr(perf.TesterTx6).As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	u := ip[40:]
	binary.BigEndian.PutUint16(u[0:], 4000)
	binary.BigEndian.PutUint16(u[2:], 5000)
	binary.BigEndian.PutUint16(u[4:], uint16(size-40))
	for i := 8; i < len(u); i++ {
		u[i] = byte(i)
	}
	perf.UDPChecksum6(u, netip.AddrFrom16(s), dst)
	return b, nil
}

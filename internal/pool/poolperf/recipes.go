// Package poolperf is the pool selector's recipe for `segchain perf`
// (docs/pools.md, docs/benchmarks.md "#29"): H.Encaps whose first SID is
// a pool's placeholder, rewritten at the headend to one of three
// instances and re-routed, against T.Encaps in the same run.
package poolperf

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
)

// Recipes: T.Encaps.pool.
//
//	T.Encaps.pool  encap seg6 mode encap segs P,far2 (as T.Encaps) with the
//	               pool selector on the SUT: P is a pool of far3..far5
//	               (weight 1 each, none of them P: every packet is
//	               rewritten and re-routed). The selector is attached to
//	               the SUT's interfaces, so the run's other arms (T.Encaps)
//	               pay its scan of their SRH too: the ratio is the cost of
//	               selecting, not of having the program.
//
//	T.Encaps.pool1 the same with a pool of one instance, P itself: the
//	               selector hashes and chooses but rewrites nothing (the
//	               cost of choosing without that of rewriting/re-routing).
//	T.Encaps.poolmiss the same with a pool the packets do not carry (its
//	               placeholder is not in their SID list): the selector
//	               scans as for T.Encaps; a control of the recipe itself.
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("T.Encaps.pool", "headend: encap seg6 mode encap, 2 SIDs, the first a pool of 3 instances (segchain's selector)", setup(pool3)),
		perf.NewRecipe("T.Encaps.pool1", "headend: as T.Encaps.pool, a pool of 1 instance (the placeholder: chosen, not rewritten)", setup(pool1)),
		perf.NewRecipe("T.Encaps.poolmiss", "headend: as T.Encaps.pool, the pool not in the packets' SID list (control)", setup(poolMiss)),
	}
}

const (
	pool3 = iota
	pool1
	poolMiss
)

func setup(kind int) func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return func(env *perf.Env, k int, p perf.Params) ([]byte, error) { return setupKind(env, k, p, kind) }
}

func setupKind(env *perf.Env, k int, p perf.Params, kind int) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("T.Encaps.pool needs the SUT's namespace here: %w", perf.ErrNotSupported)
	}
	ph := perf.Addr("far", k, 1)
	segs := ph.String() + "," + perf.Addr("far", k, 2).String()
	pfx := netip.PrefixFrom(perf.Addr("hx", k, 0), 48).String()
	if out, err := env.Run("ip", "-6", "route", "replace", pfx, "encap", "seg6", "mode", "encap", "segs", segs, "dev", env.Out); err != nil {
		return nil, fmt.Errorf("headend route: %v: %s", err, out)
	}
	pl := pool.Pool{Name: "perf", Placeholder: ph, OnFailure: pool.Failover, AllDown: pool.Drop, Symmetric: true}
	switch kind {
	case pool1:
		pl.Instances = []pool.Instance{{Name: "far1", SID: ph, Weight: 1}}
	case poolMiss:
		pl.Placeholder = perf.Addr("far", k, 9)
		pl.Instances = []pool.Instance{{Name: "far9", SID: pl.Placeholder, Weight: 1}}
	default:
		for i := 3; i <= 5; i++ {
			pl.Instances = append(pl.Instances, pool.Instance{Name: fmt.Sprintf("far%d", i), SID: perf.Addr("far", k, i), Weight: 1})
		}
	}
	var dir string
	err := env.Do(func() error {
		h, err := datapath.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		dir = h.Dir()
		return h.Program([]pool.Pool{pl})
	})
	if err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error { return bpfpin.Remove(dir) })
	}
	return frame(env, perf.Addr("hx", k, 1), p.Size)
}

// frame is a UDP/IPv6 packet of size bytes from the tester's tx port.
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
	return b, nil
}

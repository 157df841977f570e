package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
)

// ProbeMark is the packet mark of the health checker's probes: the
// selector lets them pass unchanged (a probe names its instance).
const ProbeMark = 0x5c0029

var prog = bpfpin.Program{Name: "pool", What: "pool selector", Flush: "segchain lab down or datapath.Remove",
	Load: bpfpin.Parsed(loadPoolTC)}

// Headend is the selector's state in one namespace.
type Headend struct {
	netns string
	dir   string
	objs  poolTCMaps
	prog  *ebpf.Program // pool_out (attached nowhere); nil when reopened for the maps only
	in    *ebpf.Program // pool_in; nil when reopened
	local *ebpf.Program // pool_local, the local tables' lwt xmit program; nil when reopened
	mu    sync.Mutex
}

// Open loads (or reopens) the selector's pinned maps in netns and attaches
// pool_in on ingress of every interface that lacks it. pool_out is loaded
// (the perf arms and its tests run it) but attached nowhere since session
// 17: the headend's own packets are chosen for by pool_local on their own
// route (Select), so forwarded packets cross no program on egress; an
// older segchain's pool_out links are taken off here.
func Open(netns string) (*Headend, error) {
	spec, err := prog.Spec()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["pool_probe_mark"].Set(uint32(ProbeMark)); err != nil {
		return nil, fmt.Errorf("set probe mark: %w", err)
	}
	if err := spec.Variables["pool_mark_base"].Set(uint32(MarkBase)); err != nil {
		return nil, fmt.Errorf("set mark base: %w", err)
	}
	_, dir, err := prog.Dir(netns, true, nil)
	if err != nil {
		return nil, err
	}
	h := &Headend{netns: netns, dir: dir}
	var objs poolTCObjects
	if err := prog.Assign(spec, &objs, dir); err != nil {
		return nil, err
	}
	h.objs, h.prog, h.in, h.local = objs.poolTCMaps, objs.PoolOut, objs.PoolIn, objs.PoolLocal
	if err := bpfpin.DetachAll(dir); err != nil {
		h.Close()
		return nil, fmt.Errorf("pool selector: take pool_out off egress: %w", err)
	}
	// pool_in's links pin in a directory of their own (one link pin per
	// interface and directory).
	if err := os.MkdirAll(filepath.Join(dir, inDir), 0o700); err != nil {
		h.Close()
		return nil, fmt.Errorf("create pin dir: %w", err)
	}
	// A link detached by hand (bpftool link detach) leaves its pin:
	// dropped, so that AttachAll attaches afresh.
	pins, _ := filepath.Glob(filepath.Join(dir, inDir, "tcx-*"))
	for _, p := range pins {
		if !bpfpin.LiveTCX(p) {
			_ = os.Remove(p)
		}
	}
	if err := bpfpin.AttachAll(netns, filepath.Join(dir, inDir), ebpf.AttachTCXIngress, func() (*ebpf.Program, error) { return h.in, nil }); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// inDir holds pool_in's link pins, under the selector's directory.
const inDir = "in"

// ErrNotInstalled: the namespace has no selector.
var ErrNotInstalled = errors.New("no pool selector installed")

// Reopen opens the pinned maps of netns's selector (the health checker's
// and the counters' handle), attaching nothing.
func Reopen(netns string) (*Headend, error) {
	_, dir, err := prog.Dir(netns, false, nil)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "pool_live")); err != nil {
		return nil, fmt.Errorf("%s: %w", netns, ErrNotInstalled)
	}
	spec, err := prog.Spec()
	if err != nil {
		return nil, err
	}
	h := &Headend{netns: netns, dir: dir}
	if err := prog.Assign(spec, &h.objs, dir); err != nil {
		return nil, err
	}
	return h, nil
}

// Close releases the handles; the pinned program and maps stay.
func (h *Headend) Close() error {
	if h.prog != nil {
		h.prog.Close()
	}
	if h.in != nil {
		h.in.Close()
	}
	if h.local != nil {
		h.local.Close()
	}
	return h.objs.Close()
}

// Remove detaches the selector from netns and removes its pins.
func Remove(netns string) error {
	_, dir, err := prog.Dir(netns, false, nil)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// The classifier off first (no more marks), then the tables and
	// rules the marks chose, then the programs.
	if h, err := Reopen(netns); err == nil {
		_ = h.ProgramRules(nil)
		h.Close()
	}
	if err := syncKernel(netns, nil, nil); err != nil {
		return err
	}
	if err := bpfpin.DetachAll(filepath.Join(dir, inDir)); err != nil {
		return err
	}
	return bpfpin.Remove(dir)
}

// Program writes pools (index = pool id) into the maps. A pool that is new
// or whose instances changed starts with every instance live; an unchanged
// pool keeps its liveness (the checker's). Placeholders of pools that are
// gone are removed.
func (h *Headend) Program(pools []pool.Pool) error {
	if len(pools) > pool.MaxPools {
		return fmt.Errorf("%d pools (at most %d)", len(pools), pool.MaxPools)
	}
	want := map[[16]byte]uint32{}
	for id, p := range pools {
		if err := p.Validate(); err != nil {
			return err
		}
		c := confOf(p)
		var old poolTCPoolConf
		_ = h.objs.PoolConfs.Lookup(uint32(id), &old)
		if err := h.objs.PoolConfs.Put(uint32(id), c); err != nil {
			return fmt.Errorf("pool %s: write conf: %w", p.Name, err)
		}
		if old != c {
			if err := h.objs.PoolLive.Put(uint32(id), p.AllLive()); err != nil {
				return fmt.Errorf("pool %s: write liveness: %w", p.Name, err)
			}
			// The moved flows name instances by index: forget them.
			if err := h.ForgetMoved(id); err != nil {
				return fmt.Errorf("pool %s: %w", p.Name, err)
			}
		}
		want[p.Placeholder.As16()] = uint32(id)
	}
	var k [16]byte
	var v uint32
	var stale [][16]byte
	it := h.objs.PoolSids.Iterate()
	for it.Next(&k, &v) {
		if id, ok := want[k]; !ok || id != v {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		_ = h.objs.PoolSids.Delete(k)
	}
	for k, id := range want {
		if err := h.objs.PoolSids.Put(k, id); err != nil {
			return fmt.Errorf("write pool SID: %w", err)
		}
	}
	return nil
}

func confOf(p pool.Pool) poolTCPoolConf {
	c := poolTCPoolConf{N: uint32(len(p.Instances))}
	if p.Symmetric {
		c.Flags |= uint32(poolTCPoolFlagsPOOL_SYMMETRIC)
	}
	switch p.OnFailure {
	case pool.Bypass:
		c.Flags |= uint32(poolTCPoolFlagsPOOL_FAIL_BYPASS)
	case pool.Drop:
		c.Flags |= uint32(poolTCPoolFlagsPOOL_FAIL_DROP)
	}
	if p.Rebalance {
		c.Flags |= uint32(poolTCPoolFlagsPOOL_REBALANCE)
	}
	if p.AllDown == pool.Bypass {
		c.Flags |= uint32(poolTCPoolFlagsPOOL_ALLDOWN_BYPASS)
	}
	for i, in := range p.Instances {
		c.Inst[i] = poolTCPoolInst{Sid: in.SID.As16(), Weight: uint32(in.Weight)}
	}
	for k, s := range p.Slots() {
		c.Slot[k] = poolTCPoolSlot{Seed: s.Seed, Inst: uint32(s.Instance)}
	}
	c.Nslots = uint32(len(p.Slots()))
	return c
}

// Live is a pool's liveness word (bit i: instance i up).
func (h *Headend) Live(id int) (uint32, error) {
	var v uint32
	err := h.objs.PoolLive.Lookup(uint32(id), &v)
	return v, err
}

// SetLive writes a pool's liveness word.
func (h *Headend) SetLive(id int, word uint32) error {
	return h.objs.PoolLive.Put(uint32(id), word)
}

// SetInstance sets or clears one instance's liveness bit (health.Liveness).
// One writer per headend: the health checker.
func (h *Headend) SetInstance(id, instance int, up bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, err := h.Live(id)
	if err != nil {
		return fmt.Errorf("read pool %d liveness: %w", id, err)
	}
	if up {
		w |= 1 << instance
	} else {
		w &^= 1 << instance
	}
	return h.SetLive(id, w)
}

// Stats are one pool's counters, summed over CPUs.
type Stats struct {
	Instances []uint64 `json:"instances"` // packets per instance
	Moved     uint64   `json:"moved"`     // sent to another instance than the flow's first (down) choice
	Bypass    uint64   `json:"bypass"`
	Drop      uint64   `json:"drop"`
	Errors    uint64   `json:"errors"`
	// Drops are the packets the selector dropped, by reason (bpf/pool_tc.bpf.c
	// enum pool_drop_reason: policy, no-route, rewrite, bypass-last).
	Drops map[string]uint64 `json:"drops,omitempty"`
}

// Stats reads pool id's counters (n instances).
func (h *Headend) Stats(id, n int) (Stats, error) {
	var per []poolTCPoolStats
	if err := h.objs.PoolCounters.Lookup(uint32(id), &per); err != nil {
		return Stats{}, fmt.Errorf("read pool %d counters: %w", id, err)
	}
	s := Stats{Instances: make([]uint64, n)}
	for _, c := range per {
		for i := 0; i < n && i < len(c.Inst); i++ {
			s.Instances[i] += c.Inst[i]
		}
		s.Moved += c.Moved
		s.Bypass += c.Bypass
		s.Drop += c.Drop
		s.Errors += c.Errors
	}
	for r := range numDropReasons {
		var pc []uint64
		if err := h.objs.PoolDrops.Lookup(uint32(id*numDropReasons+r), &pc); err != nil {
			return Stats{}, fmt.Errorf("read pool %d drops: %w", id, err)
		}
		var n uint64
		for _, v := range pc {
			n += v
		}
		if n > 0 {
			if s.Drops == nil {
				s.Drops = map[string]uint64{}
			}
			s.Drops[DropReason(r).String()] = n
		}
	}
	return s, nil
}

// Prog is the selector program (tests run it with BPF_PROG_TEST_RUN).
func (h *Headend) Prog() *ebpf.Program { return h.prog }

// InProg is the ingress program pool_in.
func (h *Headend) InProg() *ebpf.Program { return h.in }

// ForgetMoved drops the flows failover moved in pool id: they return to
// their first choice (as with rebalance) from the next packet.
func (h *Headend) ForgetMoved(id int) error {
	if err := h.objs.PoolSticky.Put(uint32(id), uint32(0)); err != nil {
		return fmt.Errorf("reset moved flows: %w", err)
	}
	var k poolTCPoolFlowKey
	var v poolTCPoolMovedVal
	var del []poolTCPoolFlowKey
	it := h.objs.PoolMoved.Iterate()
	for it.Next(&k, &v) {
		if k.Pool == uint32(id) {
			del = append(del, k)
		}
	}
	for _, k := range del {
		_ = h.objs.PoolMoved.Delete(k)
	}
	return nil
}

// Dir is the selector's pin directory.
func (h *Headend) Dir() string { return h.dir }

// Detach takes the programs off every interface (their pinned links),
// keeping the maps and h's program handles: the cost benchmark
// (poolperf.Measure) attaches them per arm instead.
func (h *Headend) Detach() error {
	return errors.Join(bpfpin.DetachAll(filepath.Join(h.dir, inDir)), bpfpin.DetachAll(h.dir))
}

// unattached are the interfaces of netns (but loopback) where pool_in of
// the selector pinned in dir has no live link (in/tcx-<ifindex>).
func unattached(netns, dir string) ([]string, error) {
	var out []string
	err := nsutil.Do(netns, func() error {
		l, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range l {
			if i.Flags&net.FlagLoopback == 0 && !bpfpin.LiveTCX(filepath.Join(dir, inDir, fmt.Sprintf("tcx-%d", i.Index))) {
				out = append(out, i.Name)
			}
		}
		return nil
	})
	return out, err
}

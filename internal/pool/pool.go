package pool

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
)

// Limits of the data path (bpf/pool_tc.bpf.c; datapath's test checks them).
const (
	MaxPools     = 64 // pools per headend
	MaxInstances = 8  // instances per pool
	MaxSlots     = 32 // sum of the weights of a pool's instances
	MaxSegIndex  = 7  // a pool's segment index in the SRH (SL order)
)

// Policies when a flow's instance fails (on_failure) and when none is up
// (all_down).
const (
	Failover = "failover"
	Bypass   = "bypass"
	Drop     = "drop"
)

// Instance is one SF instance: its SID and weight (slots in the hash).
type Instance struct {
	Name   string     `json:"name"` // the service that realises it
	Node   string     `json:"node"`
	SID    netip.Addr `json:"sid"`
	Weight int        `json:"weight"`
}

// Pool is one pool as a headend programs it.
type Pool struct {
	Name string `json:"name"` // the service chains name
	// Placeholder is the SID the chain's SID list carries (the first
	// instance's): the program finds the pool by it.
	Placeholder netip.Addr `json:"placeholder"`
	Instances   []Instance `json:"instances"`
	Symmetric   bool       `json:"symmetric,omitempty"`
	OnFailure   string     `json:"on_failure"`
	AllDown     string     `json:"all_down"`
	// Rebalance: a recovered instance takes its old flows back at once.
	// Otherwise the flows failover moved stay where they went (the
	// headend remembers them, 60 s idle) and only new flows return.
	Rebalance bool `json:"rebalance,omitempty"`
}

// Validate checks what the data path can hold.
func (p Pool) Validate() error {
	if len(p.Instances) == 0 || len(p.Instances) > MaxInstances {
		return fmt.Errorf("pool %s: %d instances (1..%d)", p.Name, len(p.Instances), MaxInstances)
	}
	slots := 0
	for _, in := range p.Instances {
		if in.Weight < 1 {
			return fmt.Errorf("pool %s: instance %s: weight %d < 1", p.Name, in.Name, in.Weight)
		}
		slots += in.Weight
	}
	if slots > MaxSlots {
		return fmt.Errorf("pool %s: weights sum to %d (at most %d)", p.Name, slots, MaxSlots)
	}
	return nil
}

// AllLive is the liveness word with every instance up.
func (p Pool) AllLive() uint32 { return uint32(1)<<len(p.Instances) - 1 }

// Seed is an instance's hash seed: from its SID, so that adding, removing
// or reordering other instances never moves its flows.
func Seed(sid netip.Addr) uint64 {
	h := fnv.New64a()
	b := sid.As16()
	h.Write(b[:])
	return h.Sum64()
}

// Mix is splitmix64's finaliser (the program's mix64).
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Flow is an inner packet's flow key. For IPv6 packets without ports
// (ICMPv6, other protocols) Sport/Dport carry the flow label's high 4 and
// low 16 bits, as the program reads them.
type Flow struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8
}

func words(a netip.Addr) [4]uint32 {
	var w [4]uint32
	if a.Is4() {
		b := a.As4()
		w[0] = binary.BigEndian.Uint32(b[:])
		return w
	}
	b := a.As16()
	for i := range w {
		w[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return w
}

func less(x, y [4]uint32) bool {
	for i := range x {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return false
}

// Reverse is the flow of the other direction.
func (f Flow) Reverse() Flow {
	return Flow{Src: f.Dst, Dst: f.Src, Sport: f.Dport, Dport: f.Sport, Proto: f.Proto}
}

// Hash is the program's flow_hash: symmetric hashes the canonical order
// (the lower address/port first), so both directions hash alike.
func (f Flow) Hash(symmetric bool) uint64 {
	a, b := words(f.Src), words(f.Dst)
	pa, pb := f.Sport, f.Dport
	if symmetric && (less(b, a) || (!less(a, b) && pb < pa)) {
		a, b, pa, pb = b, a, pb, pa
	}
	h := uint64(0x5eedc4a1)
	for _, w := range a {
		h = Mix(h ^ uint64(w))
	}
	for _, w := range b {
		h = Mix(h ^ uint64(w))
	}
	h = Mix(h ^ (uint64(pa)<<16 | uint64(pb)))
	return Mix(h ^ uint64(f.Proto))
}

// Slot is one of an instance's weight slots in the hash.
type Slot struct {
	Seed     uint64
	Instance int
}

// Slots are the pool's slots in order: instance i's r-th slot has seed
// Mix(Seed(SID)+r).
func (p Pool) Slots() []Slot {
	var out []Slot
	for i, in := range p.Instances {
		seed := Seed(in.SID)
		for r := 0; r < in.Weight && len(out) < MaxSlots; r++ {
			out = append(out, Slot{Seed: Mix(seed + uint64(r)), Instance: i})
		}
	}
	return out
}

// Choose is the program's choose: the instance with the flow's highest
// slot among all (first) and among the live ones (pick); -1 when none.
func (p Pool) Choose(live uint32, h uint64) (first, pick int) {
	first, pick = -1, -1
	var bestAll, bestLive uint64
	for _, sl := range p.Slots() {
		s := Mix(h ^ sl.Seed)
		if first < 0 || s > bestAll {
			bestAll, first = s, sl.Instance
		}
		if live>>sl.Instance&1 == 1 && (pick < 0 || s > bestLive) {
			bestLive, pick = s, sl.Instance
		}
	}
	return first, pick
}

// Action is what the headend does with a packet of a pool.
type Action int

// Actions.
const (
	Send     Action = iota // to Decision.Instance
	Bypassed               // the pool's segment removed
	Dropped
)

func (a Action) String() string {
	return [...]string{"send", "bypass", "drop"}[a]
}

// Decision is the model's verdict for one flow.
type Decision struct {
	Action   Action
	Instance int  // Send: the instance
	Moved    bool // Send: not the flow's first choice (it is down)
}

// Decide is the program's verdict for a flow hash under liveness live.
func (p Pool) Decide(live uint32, h uint64) Decision {
	first, pick := p.Choose(live, h)
	if pick == first {
		return Decision{Action: Send, Instance: pick}
	}
	switch {
	case p.OnFailure == Bypass:
		return Decision{Action: Bypassed, Instance: -1}
	case p.OnFailure == Drop:
		return Decision{Action: Dropped, Instance: -1}
	case pick < 0 && p.AllDown == Bypass:
		return Decision{Action: Bypassed, Instance: -1}
	case pick < 0:
		return Decision{Action: Dropped, Instance: -1}
	}
	return Decision{Action: Send, Instance: pick, Moved: true}
}

package boundary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// O-flag sampling at a chain's headend (docs/oam.md "O-flag sampling"):
// boundary_in counts the packets it lets in that match a sampled
// selector and gives 1 in Rate of them skb->mark = Mark; an ip rule sends
// those to a table whose route puts the O-flag in the SRH (internal/oam
// owns the rules and routes).

// MaxSampleSels is how many selectors one node samples (BND_SAMPLE_MAX).
const MaxSampleSels = 8

// SkipSlot is the slot of a selector that only stops the search: a chain
// not sampled whose rule comes before a sampled one's (its packets are
// the other chain's, not counted). Its Mark names the slot it serves.
const SkipSlot = 0xff

// SampleIDLen is the length of a marked packet's reported bytes.
const SampleIDLen = 48

// ErrNoSampling says the node's boundary filter cannot mark: none on the
// interfaces asked for, or one of an older segchain (re-apply to update).
var ErrNoSampling = errors.New("no boundary filter that samples")

// SampleSel is one sampled selector: a chain's ip rule as boundary_in
// matches it.
type SampleSel struct {
	Family       int // 4 or 6
	Ifindex      int // the rule's iif (0: any)
	Src, Dst     netip.Prefix
	Proto        int
	Sport, Dport [2]uint16 // inclusive; [1] 0: any
	Slot         uint32    // the counter (one per chain direction)
	Rate         uint32    // mark 1 in Rate
	Mark         uint32
	IDOff        uint32 // 0: H.Encaps (the reported bytes from L3), 40: H.Insert
	Prio         uint32 // the rule's priority: the first match counts, so the selectors go in this order
}

// SampleEvent is a packet boundary_in marked.
type SampleEvent struct {
	Ts      uint64 // bpf_ktime_get_ns
	Slot    uint32
	Ifindex uint32
	ID      [SampleIDLen]byte
}

// Sampling is the sampling part of a namespace's boundary filter.
type Sampling struct {
	n *node
}

// OpenSampling opens netns's boundary filter for sampling and returns
// the interfaces whose boundary_in marks (TCX ingress; a program of this
// segchain, using the sampling map). None, or one of an older segchain:
// the error wraps ErrNoSampling.
func OpenSampling(netns string) (*Sampling, []int, error) {
	n, err := open(netns, false)
	if err != nil {
		return nil, nil, err
	}
	if n == nil {
		return nil, nil, fmt.Errorf("netns %q: %w (none installed)", netns, ErrNoSampling)
	}
	info, err := n.objs.BndSample.Info()
	if err != nil {
		n.close()
		return nil, nil, err
	}
	id, _ := info.ID()
	pins, _ := filepath.Glob(filepath.Join(n.dir, "tcx-*-in"))
	var ifs []int
	for _, p := range pins {
		var ix int
		if _, err := fmt.Sscanf(filepath.Base(p), "tcx-%d-in", &ix); err != nil {
			continue
		}
		if err := samplingProgram(p, id); err != nil {
			n.close()
			return nil, nil, fmt.Errorf("netns %q interface %d: %w", netns, ix, err)
		}
		ifs = append(ifs, ix)
	}
	if len(ifs) == 0 {
		n.close()
		return nil, nil, fmt.Errorf("netns %q: %w (no interface filtered)", netns, ErrNoSampling)
	}
	return &Sampling{n: n}, ifs, nil
}

// samplingProgram checks that the link pinned at p is attached and runs
// a program that reads the sampling map id.
func samplingProgram(p string, id ebpf.MapID) error {
	lk, err := link.LoadPinnedLink(p, nil)
	if err != nil {
		return fmt.Errorf("%w (no boundary_in)", ErrNoSampling)
	}
	defer lk.Close()
	li, err := lk.Info()
	if err != nil || li.TCX() == nil || li.TCX().Ifindex == 0 {
		return fmt.Errorf("%w (boundary_in not attached)", ErrNoSampling)
	}
	prog, err := ebpf.NewProgramFromID(li.Program)
	if err != nil {
		return fmt.Errorf("boundary_in: %w", err)
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return fmt.Errorf("boundary_in: %w", err)
	}
	ids, ok := pi.MapIDs()
	if !ok || !slices.Contains(ids, id) {
		return fmt.Errorf("%w (boundary_in of an older segchain: apply again)", ErrNoSampling)
	}
	return nil
}

// Close releases the maps (the configuration stays).
func (s *Sampling) Close() { s.n.close() }

// Events is the ring buffer of marked packets (decode with DecodeEvent).
func (s *Sampling) Events() *ebpf.Map { return s.n.objs.BndSampleEvents }

// DecodeEvent decodes one record of Events.
func DecodeEvent(b []byte) (SampleEvent, bool) {
	var e SampleEvent
	if len(b) < 16+SampleIDLen {
		return e, false
	}
	e.Ts = binary.NativeEndian.Uint64(b)
	e.Slot = binary.NativeEndian.Uint32(b[8:])
	e.Ifindex = binary.NativeEndian.Uint32(b[12:])
	copy(e.ID[:], b[16:])
	return e, true
}

// Owner is the slot c serves (its own, or for a SkipSlot its Mark).
func (c SampleSel) Owner() uint32 {
	if c.Slot == SkipSlot {
		return c.Mark
	}
	return c.Slot
}

// Get reads the node's sampled selectors.
func (s *Sampling) Get() ([]SampleSel, error) {
	var cfg boundaryTCBndSampleCfg
	if err := s.n.objs.BndSample.Lookup(uint32(0), &cfg); err != nil {
		return nil, fmt.Errorf("boundary sampling: %w", err)
	}
	var out []SampleSel
	for i := 0; i < int(cfg.N) && i < MaxSampleSels; i++ {
		e := cfg.Sel[i]
		c := SampleSel{Family: int(e.Family), Ifindex: int(e.Ifindex), Proto: int(e.Proto),
			Sport: [2]uint16{e.SportLo, e.SportHi}, Dport: [2]uint16{e.DportLo, e.DportHi},
			Slot: e.Slot, Rate: e.Rate, Mark: e.Mark, IDOff: e.IdOff, Prio: e.Prio}
		c.Dst = wordsPrefix(c.Family, e.Dst, e.DstMask)
		c.Src = wordsPrefix(c.Family, e.Src, e.SrcMask)
		out = append(out, c)
	}
	return out, nil
}

// wordsPrefix is prefixWords' inverse (the zero prefix for an all-zero mask).
func wordsPrefix(family int, v, m [4]uint32) netip.Prefix {
	var a, mask [16]byte
	for i := 0; i < 4; i++ {
		binary.NativeEndian.PutUint32(a[4*i:], v[i])
		binary.NativeEndian.PutUint32(mask[4*i:], m[i])
	}
	bits := 0
	for _, b := range mask {
		for ; b&0x80 != 0; b <<= 1 {
			bits++
		}
	}
	if bits == 0 {
		return netip.Prefix{}
	}
	if family == 4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(a[:4])), bits)
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), bits)
}

// Set makes sels the node's sampled selectors (none: sampling off) and
// zeroes the counters of the slots that had no selector: a slot that
// keeps counting (its chain's selectors followed a change) keeps its
// counts, and the other chains' too.
func (s *Sampling) Set(sels []SampleSel) error {
	if len(sels) > MaxSampleSels {
		return fmt.Errorf("boundary sampling: %d selectors, at most %d", len(sels), MaxSampleSels)
	}
	old, err := s.Get()
	if err != nil {
		return err
	}
	var cfg boundaryTCBndSampleCfg
	zeroed := map[uint32]bool{}
	for _, c := range old {
		if c.Slot != SkipSlot {
			zeroed[c.Slot] = true // counting: kept
		}
	}
	for i, c := range sels {
		if c.Slot >= MaxSampleSels && c.Slot != SkipSlot {
			return fmt.Errorf("boundary sampling: slot %d", c.Slot)
		}
		e := &cfg.Sel[i]
		e.Family, e.Ifindex, e.Proto = uint32(c.Family), uint32(c.Ifindex), uint32(c.Proto)
		e.Dst, e.DstMask = prefixWords(c.Dst)
		e.Src, e.SrcMask = prefixWords(c.Src)
		e.SportLo, e.SportHi, e.DportLo, e.DportHi = c.Sport[0], c.Sport[1], c.Dport[0], c.Dport[1]
		e.Slot, e.Rate, e.Mark, e.IdOff, e.Prio = c.Slot, c.Rate, c.Mark, c.IDOff, c.Prio
		if c.Slot != SkipSlot && !zeroed[c.Slot] {
			zeroed[c.Slot] = true
			if err := s.n.objs.BndSampleCtrs.Put(c.Slot, boundaryTCBndSampleCtr{}); err != nil {
				return fmt.Errorf("boundary sampling: zero counters: %w", err)
			}
		}
	}
	cfg.N = uint32(len(sels))
	if err := s.n.objs.BndSample.Put(uint32(0), &cfg); err != nil {
		return fmt.Errorf("boundary sampling: %w", err)
	}
	return nil
}

// Counts reads slot's counters: the packets that matched its selectors
// and those marked.
func (s *Sampling) Counts(slot uint32) (seen, marked uint64, err error) {
	var c boundaryTCBndSampleCtr
	if err := s.n.objs.BndSampleCtrs.Lookup(slot, &c); err != nil {
		return 0, 0, fmt.Errorf("boundary sampling counters: %w", err)
	}
	return c.Seen, c.Marked, nil
}

// prefixWords is p's address masked and its mask as four network-order
// words (IPv4: the first); the zero prefix matches anything.
func prefixWords(p netip.Prefix) (v, m [4]uint32) {
	if !p.IsValid() {
		return
	}
	p = p.Masked()
	a := p.Addr().AsSlice()
	var mask [16]byte
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	for i := 0; i < len(a)/4; i++ {
		v[i] = binary.NativeEndian.Uint32(a[4*i:])
		m[i] = binary.NativeEndian.Uint32(mask[4*i:])
	}
	return
}

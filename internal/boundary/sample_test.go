package boundary

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// skbCtx is struct __sk_buff as BPF_PROG_TEST_RUN takes and returns it
// (192 bytes; mark is the third word).
type skbCtx [48]uint32

// runMark runs boundary_in on frame and returns its verdict and the mark
// it left on the packet.
func (n *node) runMark(t *testing.T, frame []byte) (uint32, uint32) {
	t.Helper()
	var in, out skbCtx
	got, err := n.objs.BoundaryIn.Run(&ebpf.RunOptions{Data: frame, Context: in, ContextOut: &out})
	if err != nil {
		t.Fatal(err)
	}
	return got, out[2]
}

// boundary_in's sampling (BPF_PROG_TEST_RUN): the packets it lets in that
// match a selector are counted per slot, the 1st, (rate+1)-th, ... get the
// selector's mark and a ring-buffer record of the 48 bytes from their L3
// header; other packets, and packets it drops, are neither counted nor
// marked. IPv6 by prefix, IPv4 by prefix, protocol and port.
func TestSampleProgram(t *testing.T) {
	n := loadTest(t, nodestate.Boundary{Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64")}})
	src, out, other := a("fc00:1a::a"), a("fc00:4d::d"), a("fc00:5d::d")
	v6 := func(dst netip.Addr) []byte { return eth6(testutil.IPv6(src, dst, nhUDP, 64, udp())) }
	v4 := func(dport byte) []byte {
		return testutil.Eth(mac1, mac2, 0x0800, testutil.IPv4("198.18.1.10", "198.18.4.13", nhUDP, true, []byte{0x0f, 0xa0, 0x1b, dport, 0, 8, 0, 0}))
	}
	rd, err := ringbuf.NewReader(n.objs.BndSampleEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	s := &Sampling{n: n}

	// No selector: nothing counted or marked.
	if v, m := n.runMark(t, v6(out)); v != actUnspec || m != 0 {
		t.Fatalf("no sampling: verdict %#x mark %#x", v, m)
	}
	sels := []SampleSel{
		{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Slot: 1, Rate: 3, Mark: 0x2a0103e9, Prio: 10},
		{Family: 4, Dst: netip.MustParsePrefix("198.18.4.0/24"), Proto: nhUDP, Dport: [2]uint16{7000, 7000}, Slot: 2, Rate: 2, Mark: 0x2a0203ea, Prio: 20},
	}
	if err := s.Set(sels); err != nil {
		t.Fatal(err)
	}
	back, err := s.Get()
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != sels[0] || back[1] != sels[1] {
		t.Fatalf("Get: %+v, want %+v", back, sels)
	}
	var marks []uint32
	for i := 0; i < 7; i++ {
		v, m := n.runMark(t, v6(out))
		if v != actUnspec {
			t.Fatalf("verdict %#x", v)
		}
		marks = append(marks, m)
		if _, m := n.runMark(t, v6(other)); m != 0 {
			t.Errorf("%s (no selector) marked %#x", other, m)
		}
	}
	if want := []uint32{0x2a0103e9, 0, 0, 0x2a0103e9, 0, 0, 0x2a0103e9}; !equal(marks, want) {
		t.Errorf("IPv6 marks %#x, want %#x", marks, want)
	}
	// Dropped by the filter (to the SID space): neither counted nor marked.
	if v, m := n.runMark(t, eth6(testutil.IPv6(src, a("fc00:1::5"), nhUDP, 64, udp()))); v != actShot || m != 0 {
		t.Errorf("sid-space: verdict %#x mark %#x", v, m)
	}
	marks = nil
	for i := 0; i < 4; i++ {
		_, m := n.runMark(t, v4(0x58)) // 7000
		marks = append(marks, m)
		if _, m := n.runMark(t, v4(0x59)); m != 0 { // 7001
			t.Errorf("IPv4 port 7001 marked %#x", m)
		}
	}
	if want := []uint32{0x2a0203ea, 0, 0x2a0203ea, 0}; !equal(marks, want) {
		t.Errorf("IPv4 marks %#x, want %#x", marks, want)
	}
	for slot, want := range map[uint32][2]uint64{1: {7, 3}, 2: {4, 2}} {
		seen, marked, err := s.Counts(slot)
		if err != nil || seen != want[0] || marked != want[1] {
			t.Errorf("slot %d: seen %d marked %d (%v), want %d %d", slot, seen, marked, err, want[0], want[1])
		}
	}
	// The records: 3 IPv6 then 2 IPv4, each the 48 bytes from L3.
	rd.SetDeadline(time.Now().Add(time.Second))
	var got []SampleEvent
	for len(got) < 5 {
		rec, err := rd.Read()
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		e, ok := DecodeEvent(rec.RawSample)
		if !ok {
			t.Fatal("short record")
		}
		got = append(got, e)
	}
	for i, e := range got {
		frame, slot := v6(out), uint32(1)
		if i >= 3 {
			frame, slot = v4(0x58), 2
		}
		// A packet shorter than 48 bytes from L3 (the IPv4 one) is
		// reported as zeros, as the taps read it after the SRH.
		want := make([]byte, SampleIDLen)
		if len(frame) >= 14+SampleIDLen {
			copy(want, frame[14:])
		}
		if e.Slot != slot || !bytes.Equal(e.ID[:], want) || e.Ts == 0 {
			t.Errorf("record %d: slot %d ts %d id %x, want slot %d id %x", i, e.Slot, e.Ts, e.ID, slot, want)
		}
	}
	// Off again: nothing marked.
	if err := s.Set(nil); err != nil {
		t.Fatal(err)
	}
	if _, m := n.runMark(t, v6(out)); m != 0 {
		t.Errorf("sampling off: marked %#x", m)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A selector in SkipSlot (another chain's rule that comes first) stops
// the search: its packets are neither counted nor marked for the sampled
// chain behind it; the chain's other packets are.
func TestSampleProgramSkip(t *testing.T) {
	n := loadTest(t, nodestate.Boundary{})
	s := &Sampling{n: n}
	src, out := a("fc00:1a::a"), a("fc00:4d::d")
	frame := func(dport byte) []byte {
		return eth6(testutil.IPv6(src, out, nhUDP, 64, []byte{0x0f, 0xa0, 0x17, dport, 0, 8, 0, 0}))
	}
	if err := s.Set([]SampleSel{
		{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Proto: nhUDP, Dport: [2]uint16{6000, 6000}, Slot: SkipSlot, Mark: 3, Prio: 5},
		{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Slot: 3, Rate: 1, Mark: 0x2a030001, Prio: 9},
	}); err != nil {
		t.Fatal(err)
	}
	if _, m := n.runMark(t, frame(0x70)); m != 0 { // 6000: the other chain's
		t.Errorf("the other chain's packet marked %#x", m)
	}
	if _, m := n.runMark(t, frame(0x58)); m != 0x2a030001 { // 5976: the sampled chain's
		t.Errorf("the sampled chain's packet marked %#x, want 0x2a030001", m)
	}
	if seen, marked, err := s.Counts(3); err != nil || seen != 1 || marked != 1 {
		t.Errorf("slot 3: seen %d marked %d (%v), want 1 1", seen, marked, err)
	}
}

// Writing the selectors again (a sampler that followed its chain's
// change, or another chain's sampler starting) keeps the counts of the
// slots that go on counting; a slot new to the filter starts from zero,
// and so does one that was off in between.
func TestSampleSetKeepsCounts(t *testing.T) {
	n := loadTest(t, nodestate.Boundary{})
	s := &Sampling{n: n}
	src, out := a("fc00:1a::a"), a("fc00:4d::d")
	frame := eth6(testutil.IPv6(src, out, nhUDP, 64, []byte{0x0f, 0xa0, 0x1b, 0x58, 0, 8, 0, 0}))
	one := SampleSel{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Slot: 1, Rate: 2, Mark: 0x2a010001, Prio: 10}
	other := SampleSel{Family: 6, Dst: netip.MustParsePrefix("fc00:5d::/64"), Slot: 2, Rate: 2, Mark: 0x2a020001, Prio: 20}
	counts := func(slot uint32) [2]uint64 {
		t.Helper()
		seen, marked, err := s.Counts(slot)
		if err != nil {
			t.Fatal(err)
		}
		return [2]uint64{seen, marked}
	}
	if err := s.Set([]SampleSel{one}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		n.runMark(t, frame)
	}
	// The chain's selector followed a change (a port range), and another
	// chain is sampled now.
	moved := one
	moved.Dport = [2]uint16{7000, 7000}
	if err := s.Set([]SampleSel{moved, other}); err != nil {
		t.Fatal(err)
	}
	if got := counts(1); got != [2]uint64{3, 2} {
		t.Errorf("slot 1 after its selector changed: seen, marked %v, want [3 2]", got)
	}
	n.runMark(t, frame)
	if got := counts(1); got != [2]uint64{4, 2} {
		t.Errorf("slot 1 after one more packet: %v, want [4 2]", got)
	}
	if got := counts(2); got != [2]uint64{0, 0} {
		t.Errorf("slot 2, new: %v, want [0 0]", got)
	}
	if err := s.Set(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]SampleSel{one}); err != nil {
		t.Fatal(err)
	}
	if got := counts(1); got != [2]uint64{0, 0} {
		t.Errorf("slot 1 sampled again after off: %v, want [0 0]", got)
	}
}

package oam

import (
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// srv6Frame is an Ethernet frame with an IPv6 header, an SRH of sids
// (Segment List[0] last) and a 48-byte inner IPv6/UDP packet.
func srv6Frame(sids []netip.Addr) []byte {
	n := len(sids)
	srh := make([]byte, 8+16*n)
	srh[0], srh[1], srh[2], srh[3], srh[4] = 41, byte(2*n), 4, byte(n-1), byte(n-1)
	for i, s := range sids {
		a := s.As16()
		copy(srh[8+16*(n-1-i):], a[:]) // sids[0] first: Segment List[n-1]
	}
	inner := make([]byte, 48)
	inner[0], inner[6], inner[7] = 0x60, 17, 64
	ip := make([]byte, 40)
	ip[0], ip[6], ip[7] = 0x60, 43, 64
	pl := len(srh) + len(inner)
	ip[4], ip[5] = byte(pl>>8), byte(pl)
	d := sids[0].As16()
	copy(ip[24:], d[:])
	f := append(make([]byte, 12), 0x86, 0xdd)
	return append(append(append(f, ip...), srh...), inner...)
}

// BenchmarkMarker is the sampling programs' own cost per packet
// (BPF_PROG_TEST_RUN, the kernel's average over b.N runs). The marker: a
// packet of the sampled chain that is counted and not marked, one of
// another chain, and one without an SRH. The tap (TCX ingress on the
// segments' nodes): a packet of the chain that is not sampled, one
// without an SRH. "empty" is a program that only returns: the test run's
// own share of each figure. Root only.
func BenchmarkMarker(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("loads eBPF: root only")
	}
	sids := []netip.Addr{netip.MustParseAddr("fc00:2::1"), netip.MustParseAddr("fc00:3::1"), netip.MustParseAddr("fc00:4::1")}
	spec, err := loadOamSample()
	if err != nil {
		b.Fatal(err)
	}
	// A rate the benchmark never reaches twice: the first run marks, the
	// rest count.
	for name, v := range map[string]any{"oam_first": sids[0].As16(), "oam_last": sids[2].As16(), "oam_rate": uint32(1 << 31)} {
		if err := spec.Variables[name].Set(v); err != nil {
			b.Fatal(err)
		}
	}
	var objs oamSampleObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	plain := srv6Frame(sids)
	plain[14+6] = 17 // no SRH: next header UDP
	// The test run's own cost per run: a program that only returns.
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	for _, c := range []struct {
		name  string
		prog  *ebpf.Program
		frame []byte
	}{
		{"empty", empty, srv6Frame(sids)},
		{"chain", objs.OamMark, srv6Frame(sids)},
		{"other-chain", objs.OamMark, srv6Frame([]netip.Addr{sids[1], sids[2]})},
		{"no-srh", objs.OamMark, plain},
		{"tap-chain", objs.OamSampled, srv6Frame(sids)},
		{"tap-no-srh", objs.OamSampled, plain},
	} {
		b.Run(c.name, func(b *testing.B) {
			var v0 oamSampleOamChainVal
			if err := objs.OamChains.Lookup(uint32(0), &v0); err != nil {
				b.Fatal(err)
			}
			_, d, err := c.prog.Benchmark(c.frame, b.N, b.ResetTimer)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
			var v oamSampleOamChainVal
			if err := objs.OamChains.Lookup(uint32(0), &v); err != nil {
				b.Fatal(err)
			}
			if c.name == "chain" && (v.Seen-v0.Seen < uint64(b.N) || v.Marked != 1) {
				b.Fatalf("the chain's packets were not counted: %+v", v)
			}
		})
	}
}

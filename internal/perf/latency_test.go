package perf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestLatBucketRanges(t *testing.T) {
	if latBuckets != (latMaxBits-latSubBits+1)*latSub {
		t.Fatalf("latBuckets = %d, want %d", latBuckets, (latMaxBits-latSubBits+1)*latSub)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []uint64{0, 1, 63, 64, 65, 127, 128, 129, 1000, 30000, 1 << 20, 1<<36 - 1}
	for i := 0; i < 100000; i++ {
		vals = append(vals, rng.Uint64N(1<<uint(rng.IntN(37))+1))
	}
	prevB := -1
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, v := range vals {
		b := latBucket(v)
		if b < prevB {
			t.Fatalf("latBucket not monotone at %d: %d after %d", v, b, prevB)
		}
		prevB = b
		lo, hi := latBucketRange(b)
		if v < lo || v >= hi {
			t.Fatalf("value %d in bucket %d = [%d, %d)", v, b, lo, hi)
		}
		if v >= latSub && float64(hi-lo) > float64(lo)/latSub {
			t.Fatalf("bucket %d = [%d, %d) wider than 1/%d of its lower bound", b, lo, hi, latSub)
		}
	}
	if got := latBucket(1 << 36); got != latBuckets-1 {
		t.Errorf("latBucket(2^36) = %d, want the last bucket %d", got, latBuckets-1)
	}
	if got := latBucket(math.MaxUint64); got != latBuckets-1 {
		t.Errorf("latBucket(max) = %d, want the last bucket", got)
	}
	// Buckets tile the range without gaps.
	for b := 1; b < latBuckets; b++ {
		_, hiPrev := latBucketRange(b - 1)
		lo, _ := latBucketRange(b)
		if lo != hiPrev {
			t.Fatalf("bucket %d starts at %d, bucket %d ends at %d", b, lo, b-1, hiPrev)
		}
	}
}

// exactQuantile is the ⌈q·n⌉-th smallest value (the definition Quantile
// approximates).
func exactQuantile(sorted []uint64, q float64) float64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return float64(sorted[min(max(r, 1), len(sorted))-1])
}

func TestLatencyQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dists := []struct {
		name string
		gen  func() uint64
	}{
		{"constant 30 µs", func() uint64 { return 30000 }},
		{"exact small values", func() uint64 { return rng.Uint64N(64) }},
		{"uniform 20–40 µs", func() uint64 { return 20000 + rng.Uint64N(20000) }},
		{"exponential mean 50 µs", func() uint64 { return uint64(rng.ExpFloat64() * 50000) }},
		{"bimodal 25 µs / 2 ms", func() uint64 {
			if rng.IntN(100) < 97 {
				return 25000 + rng.Uint64N(1000)
			}
			return 2000000 + rng.Uint64N(100000)
		}},
		{"log-normal", func() uint64 { return uint64(math.Exp(10 + rng.NormFloat64())) }},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			var h LatencyHist
			vals := make([]uint64, 200000)
			var sum uint64
			for i := range vals {
				vals[i] = d.gen()
				h.Record(vals[i])
				sum += vals[i]
			}
			sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
			if h.Count != uint64(len(vals)) || h.MaxNs != vals[len(vals)-1] || h.SumNs != sum {
				t.Fatalf("count %d max %d sum %d, want %d %d %d", h.Count, h.MaxNs, h.SumNs, len(vals), vals[len(vals)-1], sum)
			}
			prev := 0.0
			for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(vals, q)
				// The documented bound: within one bucket width, i.e.
				// 1/64 of the value (exact below 64 ns).
				tol := want / latSub
				if want < latSub {
					tol = 0
				}
				if math.Abs(got-want) > tol+1e-9 {
					t.Errorf("p%g = %.1f, want %.1f ± %.1f", 100*q, got, want, tol)
				}
				if got < prev {
					t.Errorf("p%g = %.1f below the previous quantile %.1f", 100*q, got, prev)
				}
				prev = got
			}
			if h.Quantile(1) > float64(h.MaxNs) {
				t.Errorf("p100 %.1f above max %d", h.Quantile(1), h.MaxNs)
			}
			if m := h.MeanNs(); math.Abs(m-float64(sum)/float64(len(vals))) > 1e-6 {
				t.Errorf("mean %.3f, want %.3f", m, float64(sum)/float64(len(vals)))
			}
		})
	}
}

func TestLatencyHistEmptyAddSub(t *testing.T) {
	var h LatencyHist
	if h.Quantile(0.5) != 0 || h.MeanNs() != 0 {
		t.Fatal("empty histogram: want 0")
	}
	var a, b LatencyHist
	for i := uint64(1); i <= 100; i++ {
		a.Record(i * 1000)
	}
	snap := a
	for i := uint64(1); i <= 100; i++ {
		a.Record(i * 2000)
		b.Record(i * 2000)
	}
	d := a.Sub(&snap)
	if d.Count != b.Count || d.SumNs != b.SumNs || d.Buckets != b.Buckets {
		t.Fatalf("Sub: got count %d sum %d, want %d %d", d.Count, d.SumNs, b.Count, b.SumNs)
	}
	if d.Quantile(0.5) != b.Quantile(0.5) {
		t.Errorf("Sub p50 %.0f, want %.0f", d.Quantile(0.5), b.Quantile(0.5))
	}
	if e := a.Sub(&a); e.Count != 0 || e.MaxNs != 0 {
		t.Errorf("nothing in between: count %d max %d, want 0 0", e.Count, e.MaxNs)
	}
	var m LatencyHist
	m.Add(&snap)
	m.Add(&b)
	if m.Count != a.Count || m.Buckets != a.Buckets || m.MaxNs != a.MaxNs {
		t.Errorf("Add: count %d max %d, want %d %d", m.Count, m.MaxNs, a.Count, a.MaxNs)
	}
}

// sum16 is the one's-complement sum of b's 16-bit big-endian words (what
// a checksum over b adds).
func sum16(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 { // padded with a zero byte, as checksums are
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TestStampKeepsChecksum stamps every native recipe's frame (Go twin of
// the generator) and checks the stamped bytes add up to what they
// replaced, at both word alignments; TestGeneratorStampChecksum checks
// the real generator's frames with tshark.
func TestStampKeepsChecksum(t *testing.T) {
	reg, err := NewRegistry(NativeRecipes()...)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range reg.List() {
		frame, err := r.Setup(fakeEnv(), 1, Params{Size: 64})
		if err != nil {
			continue // skipped recipes (no VRF) need a SUT
		}
		t.Run(r.Name(), func(t *testing.T) {
			off, ok := stampSpot(frame)
			if !ok {
				t.Fatalf("no room for a stamp in the %d-byte frame", len(frame))
			}
			for slot := 0; slot < 3; slot++ {
				csum := stampCsum(frame, off, slot)
				for i := 0; i < 50; i++ {
					f := append([]byte(nil), frame...)
					applyStamp(f, off, slot, csum, rng.Uint64())
					for _, from := range []int{off, off - 1} { // even and odd alignment
						if got, want := sum16(f[from:off+stampLen]), sum16(frame[from:off+stampLen]); got != want && got^want != 0xffff {
							t.Fatalf("slot %d: stamped sum %#04x, want %#04x", slot, got, want)
						}
					}
					if binary.LittleEndian.Uint32(f[off:]) != stampMagic || int(binary.LittleEndian.Uint16(f[off+4:])) != slot {
						t.Fatalf("stamp header wrong: % x", f[off:off+8])
					}
				}
			}
		})
	}
}

func TestStampSpot(t *testing.T) {
	env := fakeEnv()
	u := udp(16)
	dst := Addr("dst", 1, 1)
	UDPChecksum6(u, src6, dst)
	ok64 := frame6(env, ipv6(src6, dst, protoUDP, u))
	short := frame6(env, ipv6(src6, dst, protoUDP, udp(15)))
	padded := append(append([]byte(nil), ok64...), make([]byte, 8)...)
	frag := frame4(env, append([]byte(nil), ok64[14:]...))
	frag[14] = 0x45
	frag[14+6] = 0x20                              // MF
	unknown := frame6(env, ipv6(src6, dst, 50, u)) // ESP: opaque
	cases := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"IPv6/UDP with 16 payload bytes", ok64, true},
		{"15 payload bytes", short, false},
		{"trailing bytes after the packet", padded, false},
		{"IPv4 fragment", frag, false},
		{"unknown protocol", unknown, false},
		{"truncated", ok64[:30], false},
	}
	for _, c := range cases {
		off, ok := stampSpot(c.frame)
		if ok != c.want {
			t.Errorf("%s: stampSpot ok = %v, want %v", c.name, ok, c.want)
		}
		if ok && off != len(c.frame)-stampLen {
			t.Errorf("%s: offset %d, want %d", c.name, off, len(c.frame)-stampLen)
		}
	}
}

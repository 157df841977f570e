package perf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Per-packet latency (docs/benchmarks.md, "Latency"). The generator writes
// a stamp — magic, template slot, send time — over the last stampLen bytes
// of every frame (bpf/include/perf_lat.h); the sink reads it back at
// length − stampLen and records now − send time in a log-linear histogram
// per template slot. Both ends read CLOCK_MONOTONIC on one machine.

// latBuckets is the number of histogram buckets (PERF_LAT_BUCKETS).
const latBuckets = len(perfSinkTCPerfLatHist{}.Buckets)

// latSub is the number of buckets per power of two (PERF_LAT_SUB).
const latSub = 1 << latSubBits

// LatencyHist is a latency histogram in nanoseconds: values below 64 ns
// have a bucket each, above that every power-of-two range [2^m, 2^(m+1))
// is cut into 64 equal buckets, so a bucket is at most 1/64 of its lower
// bound wide (1.6 %: 0.5 µs at 30 µs). Quantile interpolates within the
// bucket, so a quantile is off by less than one bucket width (less
// than 1.6 % of it), and by far less where the bucket holds many values.
// Values of 2^36 ns (68.7 s) and more share the last bucket; MaxNs is
// exact.
type LatencyHist struct {
	Count   uint64
	SumNs   uint64
	MaxNs   uint64
	Buckets [latBuckets]uint64
}

// latBucket is the bucket of v ns (the Go twin of perf_lat_bucket in
// bpf/include/perf_lat.h; TestPrivilegedSinkLatency checks they agree).
func latBucket(v uint64) int {
	if v < latSub {
		return int(v)
	}
	if v>>latMaxBits != 0 {
		return latBuckets - 1
	}
	msb := 63
	for v>>uint(msb) == 0 {
		msb--
	}
	shift := msb - latSubBits
	return (shift+1)*latSub + int((v>>uint(shift))&(latSub-1))
}

// latBucketRange returns bucket i's values [lo, hi).
func latBucketRange(i int) (lo, hi uint64) {
	if i < latSub {
		return uint64(i), uint64(i) + 1
	}
	shift := uint(i/latSub - 1)
	m := uint64(i % latSub)
	lo = (latSub + m) << shift
	return lo, lo + 1<<shift
}

// Record adds one latency (tests and user-space sinks).
func (h *LatencyHist) Record(ns uint64) {
	h.Buckets[latBucket(ns)]++
	h.Count++
	h.SumNs += ns
	h.MaxNs = max(h.MaxNs, ns)
}

// Add merges o into h.
func (h *LatencyHist) Add(o *LatencyHist) {
	h.Count += o.Count
	h.SumNs += o.SumNs
	h.MaxNs = max(h.MaxNs, o.MaxNs)
	for i := range h.Buckets {
		h.Buckets[i] += o.Buckets[i]
	}
}

// Sub returns the histogram of what was recorded between old and h, two
// readings of the same cumulative histogram. MaxNs cannot be taken apart:
// it is h's (the largest since the counters were cleared), or 0 when
// nothing was recorded in between.
func (h *LatencyHist) Sub(old *LatencyHist) LatencyHist {
	var d LatencyHist
	d.Count = h.Count - old.Count
	d.SumNs = h.SumNs - old.SumNs
	for i := range h.Buckets {
		d.Buckets[i] = h.Buckets[i] - old.Buckets[i]
	}
	if d.Count > 0 {
		d.MaxNs = h.MaxNs
	}
	return d
}

// Quantile returns the q-quantile (0 < q ≤ 1) in ns: the ⌈q·Count⌉-th
// smallest latency, placed within its bucket as if the bucket's values
// were spread evenly over it (the k-th of n at lo + (k − ½)/n of the
// width), never above MaxNs. Values below 64 ns are exact. 0 when the
// histogram is empty.
func (h *LatencyHist) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.Count)))
	rank = min(max(rank, 1), h.Count)
	var seen uint64
	for i, n := range h.Buckets {
		if seen+n >= rank {
			lo, hi := latBucketRange(i)
			v := float64(lo)
			if hi-lo > 1 {
				v += (float64(rank-seen) - 0.5) / float64(n) * float64(hi-lo)
			}
			if h.MaxNs > 0 {
				v = math.Min(v, float64(h.MaxNs))
			}
			return v
		}
		seen += n
	}
	return float64(h.MaxNs)
}

// MeanNs is the mean latency (exact: the sink sums the values).
func (h *LatencyHist) MeanNs() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.SumNs) / float64(h.Count)
}

// LatencyMisses counts packets that reached the sink while latency was
// measured but carried no usable stamp, by reason (enum perf_lat_miss).
type LatencyMisses [perfSinkTCPerfLatMissReasonPERF_LAT_MISS_MAX]uint64

// Total is the number of packets missed for any reason.
func (m LatencyMisses) Total() uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// Sub returns m − old.
func (m LatencyMisses) Sub(old LatencyMisses) LatencyMisses {
	var d LatencyMisses
	for i := range m {
		d[i] = m[i] - old[i]
	}
	return d
}

// Map names the reasons (JSON reports).
func (m LatencyMisses) Map() map[string]uint64 {
	out := map[string]uint64{}
	for i, v := range m {
		if v != 0 {
			out[perfSinkTCPerfLatMissReason(i).String()] = v
		}
	}
	return out
}

// String names a latency miss reason.
func (r perfSinkTCPerfLatMissReason) String() string {
	switch r {
	case perfSinkTCPerfLatMissReasonPERF_LAT_MISS_SHORT:
		return "short"
	case perfSinkTCPerfLatMissReasonPERF_LAT_MISS_MAGIC:
		return "no-stamp"
	case perfSinkTCPerfLatMissReasonPERF_LAT_MISS_SLOT:
		return "bad-slot"
	case perfSinkTCPerfLatMissReasonPERF_LAT_MISS_CLOCK:
		return "clock"
	}
	return fmt.Sprintf("miss-%d", uint32(r))
}

// stampSpot returns where the latency stamp goes in frame: its last
// stampLen bytes, if they lie in the payload of the innermost packet
// (after every header a behaviour may add, remove or edit) and that packet
// ends where the frame does. ok is false when the frame has no such room
// (too small a packet, an unknown protocol, a fragment): its frames are
// sent unstamped and their latency is not measured.
func stampSpot(frame []byte) (off int, ok bool) {
	start, end, ok := innerPayload(frame)
	if !ok || end != len(frame) || end-start < stampLen {
		return 0, false
	}
	return len(frame) - stampLen, true
}

// innerPayload walks Ethernet, IPv4/IPv6 (with extension headers and the
// SRH), and the encapsulations SRv6 uses (IPv6, IPv4 or Ethernet in IPv6)
// down to the innermost UDP, TCP or ICMP packet and returns its payload
// [start, end) within b (end from the innermost IP length).
func innerPayload(b []byte) (start, end int, ok bool) {
	const maxDepth = 8 // nested headers of any kind
	off := 0
	proto := -1 // -1: an Ethernet header at off
	end = len(b)
	for depth := 0; depth < 4*maxDepth; depth++ {
		switch proto {
		case -1: // Ethernet (possibly VLAN-tagged)
			if off+14 > len(b) {
				return 0, 0, false
			}
			et := binary.BigEndian.Uint16(b[off+12:])
			off += 14
			for et == 0x8100 || et == 0x88a8 {
				if off+4 > len(b) {
					return 0, 0, false
				}
				et = binary.BigEndian.Uint16(b[off+2:])
				off += 4
			}
			switch et {
			case etherIPv6:
				proto = protoIPv6
			case etherIPv4:
				proto = protoIPv4
			default:
				return 0, 0, false
			}
		case protoIPv6:
			if off+40 > len(b) || b[off]>>4 != 6 {
				return 0, 0, false
			}
			end = off + 40 + int(binary.BigEndian.Uint16(b[off+4:]))
			proto = int(b[off+6])
			off += 40
		case protoIPv4:
			if off+20 > len(b) || b[off]>>4 != 4 {
				return 0, 0, false
			}
			ihl := int(b[off]&0x0f) * 4
			if ihl < 20 || binary.BigEndian.Uint16(b[off+6:])&0x3fff != 0 { // MF or an offset: a fragment
				return 0, 0, false
			}
			end = off + int(binary.BigEndian.Uint16(b[off+2:]))
			proto = int(b[off+9])
			off += ihl
		case 0, 43, 60: // hop-by-hop, routing (SRH), destination options
			if off+8 > len(b) {
				return 0, 0, false
			}
			proto = int(b[off])
			off += (int(b[off+1]) + 1) * 8
		case protoEthernet:
			proto = -1
		case protoUDP, 58, 1: // UDP, ICMPv6, ICMP: 8-byte headers
			start = off + 8
			return start, end, start <= end && end <= len(b)
		case 6: // TCP
			if off+20 > len(b) {
				return 0, 0, false
			}
			start = off + int(b[off+12]>>4)*4
			return start, end, start <= end && end <= len(b)
		default: // a fragment header, no next header, an unknown protocol
			return 0, 0, false
		}
		if off > len(b) || end > len(b) {
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// stampCsum is the template's perf_tmpl.stamp_csum for a stamp at off by
// slot: the one's-complement sum of the 16-bit host-order (little-endian)
// words the stamp replaces, less the magic and slot words. The generator
// adds the time's complement to get the word that keeps the sum (and so
// every checksum over these bytes) unchanged.
func stampCsum(frame []byte, off, slot int) uint16 {
	var sum uint32
	for i := off; i < off+stampLen; i += 2 {
		sum += uint32(binary.LittleEndian.Uint16(frame[i:]))
	}
	sum += uint32(^uint16(stampMagic & 0xffff))
	sum += uint32(^uint16(stampMagic >> 16))
	sum += uint32(^uint16(slot))
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// applyStamp writes the stamp the generator writes (tests; the Go twin
// of stamp() in bpf/perf_gen.bpf.c).
func applyStamp(frame []byte, off, slot int, csum uint16, ts uint64) {
	sum := uint32(csum)
	for s := 0; s < 64; s += 16 {
		sum += uint32(^uint16(ts >> uint(s)))
	}
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	binary.LittleEndian.PutUint32(frame[off:], stampMagic)
	binary.LittleEndian.PutUint16(frame[off+4:], uint16(slot))
	binary.LittleEndian.PutUint16(frame[off+6:], uint16(sum))
	binary.LittleEndian.PutUint64(frame[off+8:], ts)
}

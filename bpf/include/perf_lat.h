/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-packet latency of segchain perf: the generator stamps each frame's
 * last PERF_STAMP_LEN bytes with the time it sent it, the sink reads the
 * stamp back at (length − PERF_STAMP_LEN) and records now − stamp in a
 * per-template log-linear histogram.
 *
 * The tail is used because every behaviour measured edits the front of a
 * packet (encapsulation, decapsulation, SRH and DA updates, T.Insert's
 * memmove) and none its end. Both ends read CLOCK_MONOTONIC
 * (bpf_ktime_get_ns) on one machine: no clock offset.
 *
 * The stamp keeps every checksum that covers it valid: user space gives
 * each template the one's-complement sum of the 16 bytes the stamp
 * replaces, less the magic and slot words (perf_tmpl.stamp_csum), and the
 * generator writes the word "comp" so that the new 16 bytes sum to the
 * same value whatever the time. A UDP/TCP checksum over the payload thus
 * stays right (conntrack, NAT, a local socket or a userspace service see
 * a valid packet). */
#ifndef SEGCHAIN_PERF_LAT_H
#define SEGCHAIN_PERF_LAT_H

#include <linux/types.h>

/* Bytes of the stamp at the end of a frame. */
#define PERF_STAMP_LEN 16
/* Stamp magic ("SgTs" in memory order), written and compared as a __u32
 * in host order. */
#define PERF_STAMP_MAGIC 0x73546753
/* Histogram: values below PERF_LAT_SUB ns have a bucket each; above, each
 * power-of-two range [2^m, 2^(m+1)) is cut into PERF_LAT_SUB equal
 * buckets, so a bucket is at most 1/PERF_LAT_SUB of its lower bound wide
 * (1.6 %, 0.5 µs at 30 µs). 64 sub-buckets keep a slot's per-CPU
 * histogram (16 KB) under the 32 KB per-CPU value limit. */
#define PERF_LAT_SUB_BITS 6
#define PERF_LAT_SUB (1 << PERF_LAT_SUB_BITS)
/* Values of 2^PERF_LAT_MAX_BITS ns (68.7 s) and more land in the last
 * bucket (max still holds the exact value). */
#define PERF_LAT_MAX_BITS 36
#define PERF_LAT_BUCKETS ((PERF_LAT_MAX_BITS - PERF_LAT_SUB_BITS + 1) * PERF_LAT_SUB)
/* Histograms, one per generator template slot (PERF_TMPL_SLOTS). */
#define PERF_LAT_SLOTS 32

/* The stamp as it sits in the frame (host byte order: both ends are this
 * machine). */
struct perf_stamp {
	__u32 magic; /* PERF_STAMP_MAGIC */
	__u16 slot;  /* template slot that built the frame */
	__u16 comp;  /* checksum compensation, see above */
	__u64 ts_ns; /* bpf_ktime_get_ns() when the generator sent it */
};

/* Latency histogram of one template slot (per CPU: the sink runs where
 * the SUT's NAPI thread does). */
struct perf_lat_hist {
	__u64 count;  /* packets recorded */
	__u64 sum_ns; /* their total latency */
	__u64 max_ns; /* the largest */
	__u64 buckets[PERF_LAT_BUCKETS];
};

/* Why a packet reaching the sink was not recorded. */
enum perf_lat_miss_reason {
	PERF_LAT_MISS_SHORT = 0, /* shorter than a stamp */
	PERF_LAT_MISS_MAGIC,     /* no stamp: magic differs (not stamped, or the SUT changed the tail) */
	PERF_LAT_MISS_SLOT,      /* stamp names a slot out of range */
	PERF_LAT_MISS_CLOCK,     /* stamp later than the sink's clock */
	PERF_LAT_MISS_MAX,
};

/* perf_lat_bucket maps a latency (ns) to its histogram bucket; user space
 * mirrors it (internal/perf/latency.go) and a test checks both agree. */
static __always_inline __u32 perf_lat_bucket(__u64 v)
{
	__u32 msb = 0;
	__u64 x = v;

	if (v < PERF_LAT_SUB)
		return (__u32)v;
	if (v >> PERF_LAT_MAX_BITS)
		return PERF_LAT_BUCKETS - 1;
	/* floor(log2(v)) by halving: BPF has no count-leading-zeros. */
	if (x >> 32) {
		msb += 32;
		x >>= 32;
	}
	if (x >> 16) {
		msb += 16;
		x >>= 16;
	}
	if (x >> 8) {
		msb += 8;
		x >>= 8;
	}
	if (x >> 4) {
		msb += 4;
		x >>= 4;
	}
	if (x >> 2) {
		msb += 2;
		x >>= 2;
	}
	if (x >> 1)
		msb += 1;
	__u32 shift = msb - PERF_LAT_SUB_BITS;

	return (shift + 1) * PERF_LAT_SUB + (__u32)((v >> shift) & (PERF_LAT_SUB - 1));
}

#ifdef PERF_LAT_MAPS
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PERF_LAT_SLOTS);
	__type(key, __u32);
	__type(value, struct perf_lat_hist);
} perf_lat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PERF_LAT_MISS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} perf_lat_miss SEC(".maps");

/* Set by user space while latency is measured; otherwise the sink only
 * counts, at the cost it had before latency existed. */
volatile __u32 perf_lat_on;

/* Force BTF for the types Go needs (bpf2go -type). */
const enum perf_lat_miss_reason *unused_perf_lat_miss_reason __attribute__((unused));
const struct perf_stamp *unused_perf_stamp __attribute__((unused));

static __always_inline void perf_lat_missed(__u32 why)
{
	__u64 *c = bpf_map_lookup_elem(&perf_lat_miss, &why);

	if (c)
		*c += 1;
}

/* perf_lat_record records the latency of a packet whose last bytes are
 * st (read by the caller; ok = 0 when the packet was too short). */
static __always_inline void perf_lat_record(const struct perf_stamp *st, int ok)
{
	if (!ok) {
		perf_lat_missed(PERF_LAT_MISS_SHORT);
		return;
	}
	if (st->magic != PERF_STAMP_MAGIC) {
		perf_lat_missed(PERF_LAT_MISS_MAGIC);
		return;
	}
	__u32 slot = st->slot;

	if (slot >= PERF_LAT_SLOTS) {
		perf_lat_missed(PERF_LAT_MISS_SLOT);
		return;
	}
	__u64 now = bpf_ktime_get_ns();

	if (st->ts_ns > now) {
		perf_lat_missed(PERF_LAT_MISS_CLOCK);
		return;
	}
	struct perf_lat_hist *h = bpf_map_lookup_elem(&perf_lat, &slot);

	if (!h)
		return;
	__u64 d = now - st->ts_ns;
	__u32 b = perf_lat_bucket(d);

	/* Bound for the verifier (perf_lat_bucket never exceeds it). */
	if (b >= PERF_LAT_BUCKETS)
		b = PERF_LAT_BUCKETS - 1;
	h->buckets[b]++;
	h->count++;
	h->sum_ns += d;
	if (d > h->max_ns)
		h->max_ns = d;
}
#endif /* PERF_LAT_MAPS */

#endif

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain perf traffic generator.
 *
 * Run with BPF_PROG_TEST_RUN and BPF_F_TEST_XDP_LIVE_FRAMES: the kernel hands
 * this program the same few pages over and over. They are recycled without
 * being reset and the receiving stack rewrites them (MACs, hop limit, DA, SL,
 * the memmoves of T.Insert), so every frame is rewritten from the active
 * template before it is redirected to the tester's tx interface — unless
 * user space says the frames come back untouched (PERF_GEN_F_PRISTINE).
 * Switching the active slot from user space switches the traffic within a
 * frame.
 *
 * Everything here is per-frame cost on the generator's CPU, and at the
 * physical limit (≈ 100 ns a frame) every map lookup shows: the hot path
 * does two array lookups (control, template) and one per-CPU counter; the
 * verdict counters are touched only when a frame is not sent. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "perf_gen.h"
#include "perf_lat.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PERF_TMPL_SLOTS);
	__type(key, __u32);
	__type(value, struct perf_tmpl);
} perf_tmpls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct perf_gen_ctl);
} perf_ctl SEC(".maps");

/* Frames sent per template slot. The generator runs on one CPU, but a
 * per-CPU map keeps it correct if a caller spreads it over several. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PERF_TMPL_SLOTS);
	__type(key, __u32);
	__type(value, struct perf_gen_count);
} perf_sent SEC(".maps");

/* Frames not sent, per reason (PERF_GEN_SENT stays 0: see perf_sent). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PERF_GEN_VERDICT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} perf_verdicts SEC(".maps");

/* Force BTF for the types Go needs (bpf2go -type). */
const enum perf_gen_verdict *unused_perf_gen_verdict __attribute__((unused));
const enum perf_gen_flags *unused_perf_gen_flags __attribute__((unused));

static __always_inline int verdict(__u32 v, int action)
{
	__u64 *c = bpf_map_lookup_elem(&perf_verdicts, &v);

	if (c)
		*c += 1;
	return action;
}

/* rewrite copies template t over the frame, resizing it first if its
 * length differs (the kernel resets every recycled frame to the length
 * of the run's initial data). Returns a verdict, PERF_GEN_SENT on success. */
static __always_inline __u32 rewrite(struct xdp_md *ctx, const struct perf_tmpl *t, __u32 len)
{
	int cur = (int)(ctx->data_end - ctx->data);

	if (cur != (int)len && bpf_xdp_adjust_tail(ctx, (int)len - cur))
		return PERF_GEN_DROP_RESIZE;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 off;

	/* Copy in 8-byte words, about twice as fast as bpf_xdp_store_bytes.
	 * Fully unrolled (bound PERF_TMPL_MAX/8 words, left at the first word
	 * past the frame): the rolled loop's counter and back-edge cost ≈ 5%
	 * of the generator's rate at 64-byte packets. */
#pragma clang loop unroll(full)
	for (off = 0; off < PERF_TMPL_MAX; off += 8) {
		if (data + off + 8 > data_end)
			break;
		*(__u64 *)(data + off) = *(__u64 *)(t->data + off);
	}
	/* The last len % 8 bytes: one more word ending at len, overlapping
	 * what is already copied (len ≥ 14, so len - 8 ≥ 6). */
	if (len & 7) {
		__u32 last = len - 8;

		if (data + last + 8 > data_end)
			return PERF_GEN_DROP_STORE;
		*(__u64 *)(data + last) = *(__u64 *)(t->data + last);
	}
	return PERF_GEN_SENT;
}

/* stamp writes the latency stamp over the frame's last PERF_STAMP_LEN
 * bytes (template slot, send time, and the word that keeps the frame's
 * one's-complement sum, so every checksum over the payload, unchanged). */
static __always_inline void stamp(struct xdp_md *ctx, const struct perf_tmpl *t, __u32 slot)
{
	__u32 off = t->stamp_off;

	/* Bound the variable offset for the verifier. */
	if (!off || off > PERF_TMPL_MAX - PERF_STAMP_LEN)
		return;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct perf_stamp *st = data + off;

	if ((void *)(st + 1) > data_end)
		return;
	__u64 ts = bpf_ktime_get_ns();
	__u32 sum = t->stamp_csum;

	/* comp = stamp_csum − the four words of ts (one's complement). */
	sum += (__u16)~ts;
	sum += (__u16)~(ts >> 16);
	sum += (__u16)~(ts >> 32);
	sum += (__u16)~(ts >> 48);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	st->magic = PERF_STAMP_MAGIC;
	st->slot = (__u16)slot;
	st->comp = (__u16)sum;
	st->ts_ns = ts;
}

SEC("xdp")
int perf_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct perf_gen_ctl *ctl = bpf_map_lookup_elem(&perf_ctl, &zero);

	if (!ctl)
		return verdict(PERF_GEN_DROP_NO_CTL, XDP_DROP);
	if (ctl->stop)
		return verdict(PERF_GEN_IDLE_STOPPED, XDP_DROP);

	if (ctl->rate_pps) {
		__u64 now = bpf_ktime_get_ns();

		if (!ctl->epoch_ns) {
			ctl->epoch_ns = now;
			ctl->credit = 0;
		}
		/* Frames allowed so far = elapsed * rate (µs resolution keeps the
		 * product far from overflowing for any trial length). */
		__u64 allowed = (now - ctl->epoch_ns) / 1000 * ctl->rate_pps / 1000000ULL;

		/* Forget what a descheduled generator missed beyond one burst:
		 * catching up would send it at once and overflow the receiver's
		 * 256-entry veth ring, a loss the SUT is not responsible for. */
		if (ctl->credit + PERF_GEN_BURST < allowed)
			ctl->credit = allowed - PERF_GEN_BURST;
		if (ctl->credit >= allowed)
			return verdict(PERF_GEN_IDLE_RATE, XDP_DROP);
		ctl->credit++;
	}

	__u32 slot = ctl->active;
	struct perf_tmpl *t = bpf_map_lookup_elem(&perf_tmpls, &slot);

	if (!t)
		return verdict(PERF_GEN_DROP_BAD_TMPL, XDP_DROP);
	__u32 len = t->len;

	/* Bound len for the verifier: the copy reads len bytes of the map
	 * value, so it must be provably within PERF_TMPL_MAX. */
	if (len < 14 || len > PERF_TMPL_MAX)
		return verdict(PERF_GEN_DROP_BAD_TMPL, XDP_DROP);

	if (!(ctl->flags & PERF_GEN_F_PRISTINE)) {
		__u32 v = rewrite(ctx, t, len);

		if (v != PERF_GEN_SENT)
			return verdict(v, XDP_DROP);
	}

	struct perf_gen_count *sc = bpf_map_lookup_elem(&perf_sent, &slot);
	if (sc) {
		if (t->flows > 1 && t->flow_off) {
			/* Vary a 16-bit field (e.g. the UDP source port) per frame
			 * so multi-queue receivers can spread the flows. */
			__u16 v = bpf_htons((__u16)(sc->frames % t->flows) + 1024);
			bpf_xdp_store_bytes(ctx, t->flow_off, &v, sizeof(v));
		}
		sc->frames++;
		sc->bytes += len;
	}
	if (ctl->flags & PERF_GEN_F_STAMP)
		stamp(ctx, t, slot);
	return bpf_redirect(ctl->ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Shared definitions of segchain perf's XDP live-frames generator. */
#ifndef SEGCHAIN_PERF_GEN_H
#define SEGCHAIN_PERF_GEN_H

#include <linux/types.h>

/* Largest frame template (bytes): a 1500-byte IP packet in an Ethernet
 * frame (the lab's MTU; experiments' inner sizes up to 1356 leave room for
 * 144 bytes of SRv6 headers), rounded up to the word copy. */
#define PERF_TMPL_MAX 1536
/* Largest burst of a rate-limited generator (frames). */
#define PERF_GEN_BURST 32
/* Number of template slots; the active one is chosen at run time. */
#define PERF_TMPL_SLOTS 32

/* One frame template, written verbatim over every live frame. */
struct perf_tmpl {
	__u32 len;      /* bytes of data used, 14..PERF_TMPL_MAX */
	__u16 flow_off; /* offset of a 16-bit field varied per frame, 0 = none */
	__u16 flows;    /* number of distinct values at flow_off (0/1 = fixed) */
	/* Offset of the latency stamp (len − PERF_STAMP_LEN, inside the
	 * innermost payload), 0 = the frame has no room for one. */
	__u16 stamp_off;
	/* One's-complement sum (16-bit host-order words) of the template's
	 * bytes the stamp replaces, less the stamp's magic and slot words:
	 * the generator completes it with the time (perf_lat.h). */
	__u16 stamp_csum;
	__u32 pad;      /* keeps data 8-byte aligned for the word copy */
	__u8 data[PERF_TMPL_MAX];
};

/* perf_gen_ctl.flags */
enum perf_gen_flags {
	/* The frames come back unmodified and already hold the active
	 * template: skip the per-frame rewrite. User space sets it only while
	 * the sink cannot touch a frame (the native XDP_DROP of the physical
	 * limit) and the active slot is the one the run's pages were
	 * initialised with; any template switch clears it. */
	PERF_GEN_F_PRISTINE = 1 << 0,
	/* Stamp every frame whose template has a stamp_off with the send
	 * time (latency measurement, perf_lat.h). */
	PERF_GEN_F_STAMP = 1 << 1,
};

/* Generator control, written by user space while the generator runs. */
struct perf_gen_ctl {
	__u32 active;   /* template slot in use */
	__u32 stop;     /* non-zero: drop every frame without sending */
	__u32 ifindex;  /* tester tx interface frames are redirected to */
	__u32 flags;    /* enum perf_gen_flags */
	__u64 rate_pps; /* 0 = flat out, else token bucket */
	__u64 epoch_ns; /* token bucket origin (bpf_ktime_get_ns), set by the program */
	__u64 credit;   /* frames sent since epoch_ns */
};

/* Why the generator did not send a frame. */
enum perf_gen_verdict {
	PERF_GEN_SENT = 0,     /* not counted per frame: perf_sent has it */
	PERF_GEN_IDLE_STOPPED, /* stop flag set */
	PERF_GEN_IDLE_RATE,    /* ahead of the configured rate */
	PERF_GEN_DROP_NO_CTL,  /* control map lookup failed */
	PERF_GEN_DROP_BAD_TMPL,/* template slot missing or with a bad length */
	PERF_GEN_DROP_RESIZE,  /* bpf_xdp_adjust_tail failed */
	PERF_GEN_DROP_STORE,   /* bpf_xdp_store_bytes failed */
	PERF_GEN_VERDICT_MAX,
};

/* Per-template counters of frames handed to the tx interface. */
struct perf_gen_count {
	__u64 frames;
	__u64 bytes;
};

#endif

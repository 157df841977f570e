/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counter of segchain perf's sinks, shared with Go through bpf2go -type. */
#ifndef SEGCHAIN_PERF_SINK_H
#define SEGCHAIN_PERF_SINK_H

#include <linux/types.h>

struct perf_sink_count {
	__u64 packets;
	__u64 bytes;
};

#endif

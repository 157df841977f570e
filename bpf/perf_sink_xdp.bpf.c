// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain perf counting sink (XDP): counts and drops every frame before
 * the stack sees it. Attached to the SUT's input interface it measures the
 * generator's own ceiling, the physical limit of the testbed. While
 * perf_lat_on is set it also records each frame's latency from the
 * generator's stamp (perf_lat.h): the testbed's own latency floor. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "perf_sink.h"
#define PERF_LAT_MAPS
#include "perf_lat.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct perf_sink_count);
} perf_sink_counts SEC(".maps");

SEC("xdp")
int perf_sink_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct perf_sink_count *c = bpf_map_lookup_elem(&perf_sink_counts, &zero);

	if (c) {
		c->packets++;
		c->bytes += ctx->data_end - ctx->data;
	}
	if (perf_lat_on) {
		struct perf_stamp st = {};
		__u32 len = ctx->data_end - ctx->data;
		int ok = len >= PERF_STAMP_LEN &&
			 !bpf_xdp_load_bytes(ctx, len - PERF_STAMP_LEN, &st, sizeof(st));

		perf_lat_record(&st, ok);
	}
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual BSD/GPL";

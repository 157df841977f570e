// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain perf counting sink (tc): counts and drops every packet. Attached
 * to the SUT's output interface (egress) it is the rx port of the testbed;
 * on the SUT's input interface (ingress) it measures the stack ceiling.
 * While perf_lat_on is set it also records each packet's latency from the
 * generator's stamp in its last bytes (perf_lat.h). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
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

SEC("tc")
int perf_sink_tc(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct perf_sink_count *c = bpf_map_lookup_elem(&perf_sink_counts, &zero);

	if (c) {
		c->packets++;
		c->bytes += skb->len;
	}
	if (perf_lat_on) {
		struct perf_stamp st = {};
		int ok = skb->len >= PERF_STAMP_LEN &&
			 !bpf_skb_load_bytes(skb, skb->len - PERF_STAMP_LEN, &st, sizeof(st));

		perf_lat_record(&st, ok);
	}
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "Dual BSD/GPL";

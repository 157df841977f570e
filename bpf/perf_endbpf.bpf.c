// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain perf End.BPF no-op: the cheapest possible seg6local End.BPF
 * program, so the recipe measures the cost of the End.BPF hook itself. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("lwt_seg6local")
int perf_endbpf(struct __sk_buff *skb)
{
	return BPF_OK;
}

char _license[] SEC("license") = "Dual BSD/GPL";

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Writing into a tc program's packet without bpf_skb_store_bytes.
 *
 * Why: the profile of the proxies and End.AN.NF (issue #32, docs/proxies.md
 * "Fast path") had 14-15 % of the SUT's time in the memcpy of
 * bpf_skb_{load,store}_bytes: each call pays a helper call, a writability
 * check and a `rep movsb` whose start-up dominates for the 1-, 2-, 6- and
 * 80-byte copies these programs make, a dozen times per packet. Direct
 * packet access is a plain store once the verifier has seen the bounds
 * (its unclone prologue makes a cloned skb writable first, as the helper
 * would).
 *
 * pkt_copy_to copies n bytes (a multiple of 8, at most PKT_COPY_MAX) from
 * src to the packet at offset OFF (a compile-time constant) in 8-byte
 * words; bytes past the linear area (a non-linear skb) or an odd length
 * take bpf_skb_store_bytes, so the result is always the helper's.
 * pkt_copy_from is the same the other way (bpf_skb_load_bytes). Both
 * return 0 or the helper's negative error. */
#ifndef SEGCHAIN_LIB_PKTCOPY_H
#define SEGCHAIN_LIB_PKTCOPY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PKT_COPY_MAX 512

static __always_inline long pkt_copy_to(struct __sk_buff *skb, const __u32 OFF, const __u8 *src,
					__u64 n)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u32 i;

	if (n & 7)
		goto slow;
	for (i = 0; i < PKT_COPY_MAX / 8; i++) {
		__u8 *p = data + OFF + i * 8;

		if (i * 8 >= n)
			return 0;
		if ((void *)(p + 8) > end)
			goto slow;
		*(__u64 *)p = *(const __u64 *)(src + i * 8);
	}
	return 0;
slow:
	barrier_var(n);
	if (n == 0 || n > PKT_COPY_MAX)
		return -1;
	return bpf_skb_store_bytes(skb, OFF, src, n, 0);
}

static __always_inline long pkt_copy_from(struct __sk_buff *skb, const __u32 OFF, __u8 *dst,
					  __u64 n)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u32 i;

	if (n & 7)
		goto slow;
	for (i = 0; i < PKT_COPY_MAX / 8; i++) {
		__u8 *p = data + OFF + i * 8;

		if (i * 8 >= n)
			return 0;
		if ((void *)(p + 8) > end)
			goto slow;
		*(__u64 *)(dst + i * 8) = *(__u64 *)p;
	}
	return 0;
slow:
	barrier_var(n);
	if (n == 0 || n > PKT_COPY_MAX)
		return -1;
	return bpf_skb_load_bytes(skb, OFF, dst, n);
}

/* pkt_eth returns the Ethernet header of skb's linear data, or NULL. */
static __always_inline struct ethhdr *pkt_eth(struct __sk_buff *skb)
{
	struct ethhdr *eth = (void *)(long)skb->data;

	if ((void *)(eth + 1) > (void *)(long)skb->data_end)
		return 0;
	return eth;
}

#endif

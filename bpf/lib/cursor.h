/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Bounds-checked packet cursor for direct packet access (after xdp-tools'
 * parsing_helpers.h). Every accessor checks the object fits before data_end
 * and advances the cursor only on success. Re-derive cursors after any helper
 * that may move packet data (bpf_skb_adjust_room, bpf_skb_store_bytes...). */
#ifndef SEGCHAIN_LIB_CURSOR_H
#define SEGCHAIN_LIB_CURSOR_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>

/* barrier_var hides a value's provenance from clang so that a bounds check
 * written after it is really emitted on the register later passed to a
 * helper (clang otherwise merges checks and the verifier loses the bound). */
#ifndef barrier_var /* libbpf >= 1.0 has it */
#define barrier_var(var) asm volatile("" : "=r"(var) : "0"(var))
#endif

struct cursor {
	void *pos;
	void *end;
};

static __always_inline void cursor_init_skb(struct cursor *c, struct __sk_buff *skb)
{
	c->pos = (void *)(long)skb->data;
	c->end = (void *)(long)skb->data_end;
}

/* cursor_pull returns a pointer to the next len bytes and advances, or NULL
 * when the packet is shorter. len must be a compile-time constant. */
#define cursor_pull(c, len)                                                    \
	({                                                                     \
		void *__p = (c)->pos;                                          \
		if (__p + (len) > (c)->end)                                    \
			__p = 0;                                               \
		else                                                           \
			(c)->pos = __p + (len);                                \
		__p;                                                           \
	})

static __always_inline struct ethhdr *cursor_eth(struct cursor *c)
{
	return cursor_pull(c, sizeof(struct ethhdr));
}

static __always_inline struct ipv6hdr *cursor_ipv6(struct cursor *c)
{
	return cursor_pull(c, sizeof(struct ipv6hdr));
}

static __always_inline struct iphdr *cursor_ipv4(struct cursor *c)
{
	return cursor_pull(c, sizeof(struct iphdr));
}

/* cursor_skb_ipv6 points c at skb's frame and returns its IPv6 header, c
 * past it; NULL when the frame is not Ethernet + IPv6 or is too short: the
 * prologue of the tc programs that serve SIDs. */
static __always_inline struct ipv6hdr *cursor_skb_ipv6(struct cursor *c, struct __sk_buff *skb)
{
	struct ethhdr *eth;

	cursor_init_skb(c, skb);
	eth = cursor_eth(c);
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return 0;
	return cursor_ipv6(c);
}

#endif

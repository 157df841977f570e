/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ICMP (IPv4) errors generated from tc programs: icmp4_frag_needed rewrites
 * the IPv4 packet of an skb into the Destination Unreachable / Fragmentation
 * Needed that Linux sends for a DF packet that does not fit (RFC 1191),
 * addressed to the packet's source, ready to be redirected. */
#ifndef SEGCHAIN_LIB_ICMP4_H
#define SEGCHAIN_LIB_ICMP4_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "cursor.h"
#include "ipv6.h"
#include "icmp6.h" /* csum_fold32, CSUM_CHUNK */

#define IPV4_DF 0x4000
#define IPV4_FRAG_OFFSET 0x1fff
#define ICMP4_DEST_UNREACH 3
#define ICMP4_FRAG_NEEDED 4
#define ICMP4_HDR_LEN 8
/* Linux quotes up to 576 bytes of datagram in total (RFC 1812 4.3.2.3). */
#define ICMP4_QUOTE_MAX (576 - sizeof(struct iphdr) - ICMP4_HDR_LEN)
#define ICMP4_CHUNKS ((ICMP4_QUOTE_MAX + CSUM_CHUNK - 1) / CSUM_CHUNK)

struct icmp4_frag_hdr {
	__u8 type;
	__u8 code;
	__u16 csum;
	__be16 unused;
	__be16 mtu;
};

/* icmp4_frag_needed: see the file comment. Returns the egress ifindex with
 * MACs written, or a negative value when no error may be sent (no DF, a
 * non-first fragment, an ICMP error, a non-unicast source, no route back)
 * and the caller must drop; the skb may then be modified. */
static __always_inline int icmp4_frag_needed(struct __sk_buff *skb, __u32 mtu, __u8 *buf)
{
	struct {
		struct iphdr ip;
		struct icmp4_frag_hdr icmp;
	} h = {};
	struct bpf_fib_lookup f = {};
	struct iphdr orig;
	__u32 quoted, off;
	__u64 n;
	__s64 sum;
	__u8 type;
	int i;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &orig, sizeof(orig)) < 0)
		return -1;
	if (!(orig.frag_off & bpf_htons(IPV4_DF)) || (orig.frag_off & bpf_htons(IPV4_FRAG_OFFSET)) ||
	    ipv4_is_local_scope(orig.saddr) || orig.saddr == 0)
		return -1;
	if (orig.protocol == IPPROTO_ICMP &&
	    (bpf_skb_load_bytes(skb, ETH_HLEN + (__u32)orig.ihl * 4, &type, 1) < 0 ||
	     (type != 0 && type != 8 && type != 13 && type != 14 && type != 15 && type != 16)))
		return -1; /* only queries get errors */

	quoted = skb->len - ETH_HLEN;
	if (quoted > ICMP4_QUOTE_MAX)
		quoted = ICMP4_QUOTE_MAX;
	quoted &= ~3U; /* bpf_csum_diff works on 4-byte multiples */

	f.family = AF_INET;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = sizeof(h) + quoted;
	f.ipv4_dst = orig.saddr;
	if (bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SRC) != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;

	if (bpf_skb_change_tail(skb, ETH_HLEN + quoted, 0) < 0)
		return -1;
	if (bpf_skb_adjust_room(skb, sizeof(h), BPF_ADJ_ROOM_MAC, 0) < 0)
		return -1;

	h.ip.version = 4;
	h.ip.ihl = 5;
	h.ip.tot_len = bpf_htons(sizeof(h) + quoted);
	h.ip.ttl = 64;
	h.ip.protocol = IPPROTO_ICMP;
	h.ip.saddr = f.ipv4_src;
	h.ip.daddr = orig.saddr;
	h.ip.check = csum_fold32((__u32)bpf_csum_diff(0, 0, (__be32 *)&h.ip, sizeof(h.ip), 0));
	h.icmp.type = ICMP4_DEST_UNREACH;
	h.icmp.code = ICMP4_FRAG_NEEDED;
	h.icmp.mtu = bpf_htons(mtu > 0xffff ? 0xffff : mtu);

	sum = bpf_csum_diff(0, 0, (__be32 *)&h.icmp, sizeof(h.icmp), 0);
	for (i = 0; i < ICMP4_CHUNKS; i++) {
		off = i * CSUM_CHUNK;
		if (off >= quoted)
			break;
		n = quoted - off;
		if (n > CSUM_CHUNK)
			n = CSUM_CHUNK;
		barrier_var(n); /* re-check on the register the helpers get */
		if (n < 4 || n > CSUM_CHUNK)
			break;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(h) + off, buf, n) < 0)
			return -1;
		sum = bpf_csum_diff(0, 0, (__be32 *)buf, n, sum);
	}
	h.icmp.csum = csum_fold32((__u32)sum);

	if (bpf_skb_store_bytes(skb, ETH_HLEN, &h, sizeof(h), 0) < 0 ||
	    bpf_skb_store_bytes(skb, 0, f.dmac, ETH_ALEN, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_ALEN, f.smac, ETH_ALEN, 0) < 0)
		return -1;
	return f.ifindex;
}

#endif

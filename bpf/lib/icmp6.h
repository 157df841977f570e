/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ICMPv6 errors generated from tc programs: icmp6_error rewrites the IPv6
 * packet of an skb into the error Linux would send for it (RFC 4443),
 * addressed to the packet's source, and leaves it ready to be redirected;
 * icmp6_ptb is its Packet Too Big. */
#ifndef SEGCHAIN_LIB_ICMP6_H
#define SEGCHAIN_LIB_ICMP6_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "cursor.h"
#include "ipv6.h"

#define IPV6_MIN_MTU 1280
#define ICMP6_ERR_HDR_LEN 8
#define ICMP6_DEST_UNREACH 1
#define ICMP6_PKT_TOOBIG 2
#define ICMP6_PARAM_PROB 4
/* An ICMPv6 error quotes as much of the packet as fits in the minimum MTU. */
#define ICMP6_QUOTE_MAX (IPV6_MIN_MTU - sizeof(struct ipv6hdr) - ICMP6_ERR_HDR_LEN)
/* bpf_csum_diff handles at most 512 bytes per call. */
#define CSUM_CHUNK 512
#define CSUM_CHUNKS ((ICMP6_QUOTE_MAX + CSUM_CHUNK - 1) / CSUM_CHUNK)

struct icmp6_err_hdr {
	__u8 type;
	__u8 code;
	__u16 csum;
	__be32 info; /* the MTU for Packet Too Big */
};

static __always_inline __u16 csum_fold32(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* icmp6_error rewrites the IPv6 packet after the Ethernet header into the
 * ICMPv6 error Linux would send for it (RFC 4443): type, code and the
 * 32-bit info word (pointer, MTU, unused) as given, from the address the
 * FIB selects towards the packet's source, quoting as much of the packet as
 * fits in the minimum MTU. buf is CSUM_CHUNK bytes of scratch
 * memory (a map value). Returns the ifindex to redirect to, with MACs
 * written, or a negative value when no error may be sent (no route back,
 * the packet is itself an ICMPv6 error, a non-unicast source: RFC 4443
 * 2.4); the skb may then be modified and must be dropped. */
static __always_inline int icmp6_error(struct __sk_buff *skb, __u8 type, __u8 code, __u32 info,
				       __u8 *buf)
{
	struct {
		struct ipv6hdr ip;
		struct icmp6_err_hdr icmp;
	} h = {};
	struct {
		struct in6_addr src;
		struct in6_addr dst;
		__be32 len;
		__be32 nh;
	} ph;
	struct bpf_fib_lookup f = {};
	struct ipv6hdr orig;
	__u32 quoted, aligned, off;
	__u8 tail[4] = {};
	__u64 n;
	__s64 sum;
	__u8 t;
	int i;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &orig, sizeof(orig)) < 0)
		return -1;
	if (ipv6_addr_is_multicast(&orig.saddr) || ipv6_addr_is_unspecified(&orig.saddr))
		return -1;
	if (orig.nexthdr == IPPROTO_ICMPV6 &&
	    (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(orig), &t, 1) < 0 || t < 128))
		return -1;

	quoted = skb->len - ETH_HLEN;
	if (quoted > ICMP6_QUOTE_MAX)
		quoted = ICMP6_QUOTE_MAX;
	/* bpf_csum_diff works on 4-byte multiples: the checksum loop covers
	 * the aligned part and the last 1-3 bytes are summed zero-padded
	 * (RFC 1071), so a short packet is quoted whole (RFC 4443 2.4(c)). */
	aligned = quoted & ~3U;

	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = sizeof(h) + quoted;
	__builtin_memcpy(f.ipv6_dst, &orig.saddr, sizeof(orig.saddr));
	if (bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SRC) != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	if (bpf_skb_change_tail(skb, ETH_HLEN + quoted, 0) < 0)
		return -1;
	if (bpf_skb_adjust_room(skb, sizeof(h), BPF_ADJ_ROOM_MAC, 0) < 0)
		return -1;

	h.ip.version = 6;
	h.ip.payload_len = bpf_htons(ICMP6_ERR_HDR_LEN + quoted);
	h.ip.nexthdr = IPPROTO_ICMPV6;
	h.ip.hop_limit = 64;
	__builtin_memcpy(&h.ip.saddr, f.ipv6_src, sizeof(h.ip.saddr));
	h.ip.daddr = orig.saddr;
	h.icmp.type = type;
	h.icmp.code = code;
	h.icmp.info = bpf_htonl(info);

	ph.src = h.ip.saddr;
	ph.dst = h.ip.daddr;
	ph.len = bpf_htonl(ICMP6_ERR_HDR_LEN + quoted);
	ph.nh = bpf_htonl(IPPROTO_ICMPV6);
	sum = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	sum = bpf_csum_diff(0, 0, (__be32 *)&h.icmp, sizeof(h.icmp), sum);
	for (i = 0; i < CSUM_CHUNKS; i++) {
		off = i * CSUM_CHUNK;
		if (off >= aligned)
			break;
		n = aligned - off;
		if (n > CSUM_CHUNK)
			n = CSUM_CHUNK;
		barrier_var(n); /* re-check on the register the helpers get */
		if (n < 4 || n > CSUM_CHUNK)
			break;
		if (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(h) + off, buf, n) < 0)
			return -1;
		sum = bpf_csum_diff(0, 0, (__be32 *)buf, n, sum);
	}
	/* Constant lengths for the verifier; aligned is even, so the padded
	 * word sits on the checksum's 16-bit grid. */
	off = ETH_HLEN + sizeof(h) + aligned;
	switch (quoted - aligned) {
	case 1:
		if (bpf_skb_load_bytes(skb, off, tail, 1) < 0)
			return -1;
		break;
	case 2:
		if (bpf_skb_load_bytes(skb, off, tail, 2) < 0)
			return -1;
		break;
	case 3:
		if (bpf_skb_load_bytes(skb, off, tail, 3) < 0)
			return -1;
		break;
	}
	if (quoted != aligned)
		sum = bpf_csum_diff(0, 0, (__be32 *)tail, sizeof(tail), sum);
	h.icmp.csum = csum_fold32((__u32)sum);

	if (bpf_skb_store_bytes(skb, ETH_HLEN, &h, sizeof(h), 0) < 0 ||
	    bpf_skb_store_bytes(skb, 0, f.dmac, ETH_ALEN, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_ALEN, f.smac, ETH_ALEN, 0) < 0)
		return -1;
	return f.ifindex;
}

/* icmp6_ptb: the Packet Too Big (RFC 4443 3.2) reporting mtu. */
static __always_inline int icmp6_ptb(struct __sk_buff *skb, __u32 mtu, __u8 *buf)
{
	return icmp6_error(skb, ICMP6_PKT_TOOBIG, 0, mtu, buf);
}

#endif

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* IPv6 / SRv6 helpers shared by segchain's eBPF programs: address tests,
 * constants the uapi headers lack, and the one definition of an extension
 * header walk: which Next Header values are extension headers, how long
 * each is, when an SRH is structurally valid, and the walk's bound. The
 * proxies, End.AN.NF and srv6svc's XDP walk with ipv6_walk.h (over
 * bpf_skb_load_bytes / bpf_xdp_load_bytes: variable offsets are easier on
 * the verifier that way); the firewall steps with the same primitives over
 * its own reader (fw_tc.bpf.c: ext_step). */
#ifndef SEGCHAIN_LIB_IPV6_H
#define SEGCHAIN_LIB_IPV6_H

#include <linux/types.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* From <sys/socket.h>; the uapi headers do not define them. */
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Added to the uapi in Linux 6.3; the build host's headers (6.1) lack them.
 * Values from include/uapi/linux/bpf.h of Linux >= 6.3. */
#define SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)

/* Bound of every extension-header walk: more headers than this is
 * malformed for our purposes (and keeps the verifier's state count finite).
 * The firewall applies it to the outer and the inner header chain each. */
#define IPV6_EXT_MAX 8 /* extension headers walked per header chain */

#define IPV6_SRH_FIXED_LEN 8 /* sizeof(struct ipv6_sr_hdr) without segments */

/* ICMPv6 neighbour discovery types: router solicitation (133) through
 * redirect (137), RFC 4861. */
#define ICMPV6_ND_FIRST 133
#define ICMPV6_ND_LAST 137

static __always_inline int ipv6_addr_is_linklocal(const struct in6_addr *a)
{
	return a->in6_u.u6_addr8[0] == 0xfe && (a->in6_u.u6_addr8[1] & 0xc0) == 0x80;
}

static __always_inline int ipv6_addr_is_multicast(const struct in6_addr *a)
{
	return a->in6_u.u6_addr8[0] == 0xff;
}

static __always_inline int ipv6_addr_is_unspecified(const struct in6_addr *a)
{
	return (a->in6_u.u6_addr32[0] | a->in6_u.u6_addr32[1] |
		a->in6_u.u6_addr32[2] | a->in6_u.u6_addr32[3]) == 0;
}

/* ipv4_is_local_scope: 169.254/16, multicast and limited broadcast are
 * link-local traffic that a proxy must never encapsulate. addr is in
 * network byte order. */
static __always_inline int ipv4_is_local_scope(__be32 addr)
{
	__u32 h = bpf_ntohl(addr);

	return (h & 0xffff0000) == 0xa9fe0000 || (h & 0xf0000000) == 0xe0000000 ||
	       h == 0xffffffff;
}

/* ipv6_is_ext: nh names an extension header a walk steps over (RFC 8200
 * 4.1, and AH, RFC 4302). */
static __always_inline int ipv6_is_ext(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_FRAGMENT ||
	       nh == IPPROTO_AH || nh == IPPROTO_DSTOPTS;
}

/* ipv6_ext_len is the length in bytes of extension header nh whose second
 * byte is len: a fragment header is 8 bytes, AH's length counts 4-octet
 * units minus 2 (RFC 4302 2.2), the others' 8-octet units after the first
 * (RFC 8200 4.3). */
static __always_inline __u32 ipv6_ext_len(__u8 nh, __u8 len)
{
	if (nh == IPPROTO_FRAGMENT)
		return 8;
	if (nh == IPPROTO_AH)
		return ((__u32)len + 2) * 4;
	return ((__u32)len + 1) * 8;
}

/* ipv6_srh_valid: a routing header is a structurally valid SRH: type 4,
 * (last_entry+1)*2 <= hdrlen (the segments fit), segments_left <=
 * last_entry. */
static __always_inline int ipv6_srh_valid(const struct ipv6_sr_hdr *srh)
{
	return srh->type == IPV6_SRCRT_TYPE_4 &&
	       ((__u32)srh->first_segment + 1) * 2 <= srh->hdrlen &&
	       srh->segments_left <= srh->first_segment;
}

#endif

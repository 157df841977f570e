/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* IPv6 / SRv6 helpers shared by segchain's eBPF programs: address tests,
 * constants the uapi headers lack, and the one definition of an extension
 * header walk: which Next Header values are extension headers, how long
 * each is, when an SRH is structurally valid, and the walk's bound. The
 * proxies and the boundary walk with ipv6_walk_ext_ctx (over
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

/* Result of walking the extension headers that follow a fixed IPv6 header. */
struct ipv6_walk {
	__u32 srh_off;	 /* offset of the SRH, 0 if none */
	__u32 nh_off;	 /* offset of the next-header byte that names `upper` */
	__u32 upper_off; /* offset of the first non-extension header */
	__u8 upper;	 /* its protocol number */
	__u8 sl;	 /* SRH segments left (valid when srh_off) */
	__u8 last_entry; /* SRH last entry (valid when srh_off) */
	__u8 fragment;	 /* a fragment header was seen */
	__u8 bad_rh;	 /* a routing header other than a valid SRH */
	__u8 multi_srh;	 /* more than one SRH */
	__u8 truncated;	 /* the walk ran past the packet */
	__u8 too_many;	 /* more than IPV6_EXT_MAX extension headers */
};

/* ipv6_walk_ext_ctx walks hop-by-hop, destination options and routing
 * headers starting after the IPv6 header at off (nexthdr is its Next
 * Header) of a tc (xdp = 0, ctx a __sk_buff) or XDP (xdp = 1, ctx an
 * xdp_md) packet of len bytes; xdp must be a compile-time constant. The
 * routing header must be a valid SRH (ipv6_srh_valid). A fragment header
 * ends the walk (w->fragment); AH is not walked: it is the upper layer
 * here (the proxies and the boundary never look past it). */
#define ipv6_load_bytes(ctx, xdp, off, to, n)                                  \
	((xdp) ? bpf_xdp_load_bytes((ctx), (off), (to), (n))                  \
	       : bpf_skb_load_bytes((ctx), (off), (to), (n)))

static __always_inline void ipv6_walk_ext_ctx(void *ctx, int xdp, __u32 len, __u32 off,
					      __u8 nexthdr, struct ipv6_walk *w)
{
	__u32 nh_off = off - sizeof(struct ipv6hdr) + 6; /* ipv6hdr.nexthdr */
	int i;

	__builtin_memset(w, 0, sizeof(*w));
	for (i = 0; i < IPV6_EXT_MAX; i++) {
		struct ipv6_sr_hdr srh;
		__u8 hdr[2];

		switch (nexthdr) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
			if (ipv6_load_bytes(ctx, xdp, off, hdr, sizeof(hdr)) < 0) {
				w->truncated = 1;
				return;
			}
			nh_off = off;
			off += ipv6_ext_len(nexthdr, hdr[1]); /* this header's length */
			nexthdr = hdr[0];
			continue;
		case IPPROTO_ROUTING:
			if (ipv6_load_bytes(ctx, xdp, off, &srh, sizeof(srh)) < 0) {
				w->truncated = 1;
				return;
			}
			if (!ipv6_srh_valid(&srh)) {
				w->bad_rh = 1;
				return;
			}
			if (w->srh_off) {
				w->multi_srh = 1;
				return;
			}
			w->srh_off = off;
			w->sl = srh.segments_left;
			w->last_entry = srh.first_segment;
			nh_off = off;
			nexthdr = srh.nexthdr;
			off += ipv6_ext_len(IPPROTO_ROUTING, srh.hdrlen);
			continue;
		case IPPROTO_FRAGMENT:
			w->fragment = 1;
			return;
		default:
			w->nh_off = nh_off;
			w->upper_off = off;
			w->upper = nexthdr;
			if (off > len)
				w->truncated = 1;
			return;
		}
	}
	w->too_many = 1;
}

/* ipv6_walk_skb and ipv6_walk_xdp are ipv6_walk_ext_ctx as global (not
 * inlined) functions, for a tc and an XDP program: the verifier checks
 * each once, on its own and with its arguments unknown, instead of once
 * for every path of every caller into the walk (the boundary filter's
 * boundary_in: 67,031 instructions processed inlined, 1,577 so). The
 * caller then knows nothing of w's fields but what it checks. They
 * return 0. Unused ones are left out of the program. */
__noinline int ipv6_walk_skb(struct __sk_buff *skb, __u32 len, __u32 off, __u32 nexthdr,
			     struct ipv6_walk *w)
{
	if (!w)
		return 0;
	ipv6_walk_ext_ctx(skb, 0, len, off, nexthdr, w);
	return 0;
}

__noinline int ipv6_walk_xdp(struct xdp_md *ctx, __u32 len, __u32 off, __u32 nexthdr,
			     struct ipv6_walk *w)
{
	if (!w)
		return 0;
	ipv6_walk_ext_ctx(ctx, 1, len, off, nexthdr, w);
	return 0;
}

/* ipv6_walk_ext walks a tc program's packet (ipv6_walk_skb). */
static __always_inline void ipv6_walk_ext(struct __sk_buff *skb, __u32 off, __u8 nexthdr,
					  struct ipv6_walk *w)
{
	ipv6_walk_skb(skb, skb->len, off, nexthdr, w);
}

#endif

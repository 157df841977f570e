/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The IPv6 extension-header walk shared by the programs that look for an
 * SRH (proxies, End.AN.NF, srv6svc's XDP). Its own header: the global
 * functions are compiled into every object that includes it, and the
 * firewall, which has its own parser, does not. */
#ifndef SEGCHAIN_LIB_IPV6_WALK_H
#define SEGCHAIN_LIB_IPV6_WALK_H

#include "ipv6.h"

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

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain SR domain boundary filter (RFC 8754 section 5.1), attached with
 * TCX to every boundary interface of a domain node: ingress first in the
 * chain (before the firewall and the SR proxies), and egress.
 *
 * One LPM lookup of the IPv6 destination decides ordinary traffic:
 *   - inside a locator of the domain (the SID space) and not an external
 *     SID: dropped on the way in (sid-space / sid-space-srh) and on the way
 *     out (leak-sid: an egress must not hand the domain's SIDs to the
 *     outside);
 *   - an external SID (a more specific entry): passed;
 *   - an address of a domain node, or any address local to this node (FIB
 *     lookup), with an SRH: dropped on the way in (srh-to-node): the kernel
 *     would process the SRH and forward it into the domain;
 *   - an address of an SF node (a service function behind a proxy): dropped
 *     on the way in, plain or SRv6 (to-sf): an SF receives its packets from
 *     its proxy only, straight to it they skip the chain (and its kernel
 *     would process an SRH and forward it into the domain).
 * Everything else returns TC_ACT_UNSPEC (TCX_NEXT): the next program (the
 * firewall, the proxies) or the stack sees it unchanged. Only packets whose
 * first next header is an extension header are walked, so plain TCP, UDP
 * and ICMPv6 cost one lookup. boundary_xdp is the ingress decision as an
 * XDP program (measured, not attached by segchain). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <linux/seg6_hmac.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/cursor.h"
#include "lib/ipv6.h"

#ifndef TC_ACT_UNSPEC
#define TC_ACT_UNSPEC (-1)
#endif

#define BND_LPM_MAX 4096	/* locators, external SIDs, node and SF addresses */
#define BND_COUNTERS_MAX 1024	/* (interface, direction, reason) counters */
#define BND_HMAC_SIDS_MAX 1024	/* local SIDs of signed chains */
#define BND_HMAC_KEYS_MAX 1024	/* the domain's HMAC key ids */
#define BND_NEXTHDR_ETHERNET 143 /* RFC 8986: an Ethernet frame follows (no uapi name) */
#define BND_HMAC_TLV_LEN 38	/* sr6_tlv_hmac without type and length, as the kernel requires */
#define BND_VLAN_MAX 4		/* 802.1Q/802.1ad tags read in front of IPv6 */
#define BND_SEGS_MAX 128	/* segments of an SRH: hdrlen <= 255 holds at most 127 */

/* What a destination prefix is (bnd_lpm's value). */
enum bnd_kind {
	BND_NONE,
	BND_SID,      /* a locator: the domain's SID space */
	BND_EXTERNAL, /* a SID declared reachable from outside */
	BND_NODE,     /* an address of a domain node */
	BND_SF,       /* an address of an SF node: reached from its proxy only */
};

struct bnd_key {
	__u32 prefixlen;
	struct in6_addr addr;
};

struct bnd_dest {
	__u32 kind; /* enum bnd_kind */
};

enum bnd_drop_reason {
	BND_DROP_SID,	    /* "sid-space": in: DA in the SID space, no SRH */
	BND_DROP_SID_SRH,   /* "sid-space-srh": in: DA in the SID space, with an SRH */
	BND_DROP_SRH_NODE,  /* "srh-to-node": in: SRH addressed to a domain node or this node */
	BND_DROP_MALFORMED, /* "malformed": in: addressed to a node, an SRH may hide: headers unreadable, a fragment, two SRHs */
	BND_DROP_LEAK_SID,  /* "leak-sid": out: DA in the SID space leaving the domain */
	BND_DROP_HMAC_MISSING,	   /* "hmac-missing": hmac: signed SID, no SRH or an SRH without the HMAC flag */
	BND_DROP_HMAC_MALFORMED,   /* "hmac-malformed": hmac: HMAC flag, but no well-formed HMAC TLV after the segments */
	BND_DROP_HMAC_UNKNOWN_KEY, /* "hmac-unknown-key": hmac: key id not in the domain's key table */
	BND_DROP_EXTERNAL_NEXT,	   /* "external-next": in: to an external SID, but a segment left after it (or the inner packet) is addressed into the domain */
	BND_DROP_VLAN,		   /* "vlan": in: more 802.1Q/802.1ad tags than the filter reads (BND_VLAN_MAX) */
	BND_DROP_HMAC_MISPLACED,   /* "hmac-misplaced": hmac: the SRH is not the header the kernel checks the HMAC on (another header before it, or more than one routing header) */
	BND_DROP_TO_SF,		   /* "to-sf": in: addressed to an SF node (plain or SRv6): an SF is reached through its proxy only */
	BND_DROP_MAX,
};

/* Counters are per interface, direction and reason; only drops are counted,
 * so ordinary traffic never touches this map. */
struct bnd_ctr_key {
	__u32 ifindex;
	__u32 reason; /* enum bnd_drop_reason */
};

struct bnd_ctr {
	__u64 packets;
	__u64 bytes;
};

/* Keep the enums in BTF for bpf2go -type (Go reads their names). */
const enum bnd_kind *unused_kind __attribute__((unused));
const enum bnd_drop_reason *unused_drop_reason __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BND_LPM_MAX);
	__type(key, struct bnd_key);
	__type(value, struct bnd_dest);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} bnd_lpm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, BND_COUNTERS_MAX);
	__type(key, struct bnd_ctr_key);
	__type(value, struct bnd_ctr);
} bnd_counters SEC(".maps");

/* Local SIDs of signed chains (value unused) and the domain's key ids:
 * the hmac program classifies why the kernel would refuse a packet. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BND_HMAC_SIDS_MAX);
	__type(key, struct bnd_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} bnd_hmac_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BND_HMAC_KEYS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} bnd_hmac_keys SEC(".maps");

/* O-flag sampling at the headend (RFC 9259 §2.1; internal/oam, docs/oam.md
 * "O-flag sampling"): boundary_in, on a packet it lets in, counts the
 * packets matching a sampled chain's selectors (the chain's ip rules) and
 * gives the 1st, (rate+1)-th, ... of them skb->mark = mark: an ip rule
 * "<the chain's selectors> fwmark mark" one priority before the chain's
 * own sends it to a table holding the chain's route with the O-flag in its
 * SRH, so the kernel encapsulates (and, for a signed chain, signs) it
 * O-flagged. Each marked packet is reported (bnd_sample_events). With no
 * selector (n = 0, every node but a sampled chain's headend) the cost is
 * one inlined array lookup and a compare. */
#define BND_SAMPLE_MAX 8	/* sampled selectors on one node */
#define BND_VLAN_VID 0x0fff	/* the VLAN ID bits of a TCI */
#define BND_SAMPLE_ID_LEN 48	/* the bytes the taps report after the SRH */

struct bnd_sample_sel {
	__u32 family;	   /* 4 or 6 */
	__u32 ifindex;	   /* the rule's iif (0: any) */
	__u32 dst[4];	   /* masked, network order; IPv4: dst[0] */
	__u32 dst_mask[4];
	__u32 src[4];
	__u32 src_mask[4];
	__u32 proto;	   /* 0: any */
	__u16 sport_lo, sport_hi; /* host order; sport_hi 0: any */
	__u16 dport_lo, dport_hi;
	__u32 slot;	   /* bnd_sample_ctrs index: the chain (direction); >= BND_SAMPLE_MAX: a chain not sampled (its packets are not counted) */
	__u32 rate;	   /* mark 1 in rate (0: count only) */
	__u32 mark;	   /* skb->mark of a marked packet */
	__u32 id_off;	   /* the reported bytes start this far after L3: 0 (H.Encaps), 40 (H.Insert) */
	__u32 prio;	   /* the rule's priority (Go keeps the selectors in the kernel's rule order) */
};

struct bnd_sample_cfg {
	__u32 n; /* selectors in use, in the kernel's rule order */
	__u32 pad;
	struct bnd_sample_sel sel[BND_SAMPLE_MAX];
};

struct bnd_sample_ctr {
	__u64 seen;   /* packets matching the slot's selectors */
	__u64 marked; /* of them, given the mark */
};

struct bnd_sample_event {
	__u64 ts;     /* bpf_ktime_get_ns */
	__u32 slot;
	__u32 ifindex;
	__u8 id[BND_SAMPLE_ID_LEN];
};

const struct bnd_sample_event *unused_sample_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bnd_sample_cfg);
} bnd_sample SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BND_SAMPLE_MAX);
	__type(key, __u32);
	__type(value, struct bnd_sample_ctr);
} bnd_sample_ctrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} bnd_sample_events SEC(".maps");

/* bnd_count counts a drop on ifindex. */
static __noinline void bnd_count(__u32 ifindex, __u32 len, __u32 reason)
{
	struct bnd_ctr_key k = { .ifindex = ifindex, .reason = reason };
	struct bnd_ctr *c = bpf_map_lookup_elem(&bnd_counters, &k);

	if (!c) {
		struct bnd_ctr zero = {};

		/* Full map: the packet is still dropped, uncounted only if
		 * more than BND_COUNTERS_MAX (interface, reason) pairs exist. */
		bpf_map_update_elem(&bnd_counters, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&bnd_counters, &k);
	}
	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

static __always_inline int bnd_drop(struct __sk_buff *skb, __u32 reason)
{
	bnd_count(skb->ifindex, skb->len, reason);
	return TC_ACT_SHOT;
}

static __always_inline int ipv6_ext(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS ||
	       nh == IPPROTO_AH || nh == IPPROTO_FRAGMENT;
}

static __always_inline int eth_type_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/* l3_off is where the IPv6 header of the Ethernet frame data..end starts,
 * behind any 802.1Q/802.1ad tags in the data; 0 when the frame does not
 * carry IPv6 there (or is too short: the stack drops it), -1 when more than
 * BND_VLAN_MAX tags hide what is inside. The kernel strips priority tags
 * (VID 0), however many, and hands the rest to the IPv6 stack (or, for a
 * non-zero VID, drops it or hands it to a VLAN device, filtered too): so
 * the filter judges the IPv6 packet inside whatever the VIDs. A tag the
 * driver or the stack already pulled into skb->vlan_tci is not in the data
 * and needs nothing. */
static __always_inline int l3_off(void *data, void *end)
{
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__be16 proto;
	int i;

	if (data + sizeof(*eth) > end)
		return 0;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_IPV6))
		return off;
#pragma unroll
	for (i = 0; i < BND_VLAN_MAX; i++) {
		__be16 *next = data + off + 2; /* struct vlan_hdr: TCI, then the type */

		if (!eth_type_vlan(proto))
			break;
		if ((void *)(next + 1) > end)
			return 0;
		proto = *next;
		off += 4;
	}
	if (eth_type_vlan(proto))
		return -1;
	return proto == bpf_htons(ETH_P_IPV6) ? off : 0;
}

/* ip6_at returns the IPv6 header at l3 of the packet data..end, or NULL. */
static __always_inline struct ipv6hdr *ip6_at(void *data, void *end, __u32 l3)
{
	struct ipv6hdr *ip6;

	/* Verifier: l3 is 14 + 4 * (at most BND_VLAN_MAX) tags. */
	if (l3 > sizeof(struct ethhdr) + 4 * BND_VLAN_MAX)
		return 0;
	ip6 = data + l3;
	if ((void *)(ip6 + 1) > end)
		return 0;
	return ip6;
}

/* ctx_ip6 is ip6_at for a tc (xdp = 0) or XDP (xdp = 1) context. */
#define ctx_ip6(ctx, xdp, l3)                                                          \
	((xdp) ? ip6_at((void *)(long)((struct xdp_md *)(ctx))->data,                  \
			(void *)(long)((struct xdp_md *)(ctx))->data_end, (l3))        \
	       : ip6_at((void *)(long)((struct __sk_buff *)(ctx))->data,               \
			(void *)(long)((struct __sk_buff *)(ctx))->data_end, (l3)))

#define ctx_load_bytes(ctx, xdp, off, to, n)                                            \
	((xdp) ? bpf_xdp_load_bytes((struct xdp_md *)(ctx), (off), (to), (n))            \
	       : bpf_skb_load_bytes((struct __sk_buff *)(ctx), (off), (to), (n)))

/* local_dest reports whether the FIB delivers daddr locally (or does not
 * forward it at all) for a packet arriving on ifindex. */
static __always_inline int local_dest(void *ctx, __u32 ifindex, struct ipv6hdr *ip6)
{
	struct bpf_fib_lookup f = {};

	f.family = AF_INET6;
	f.ifindex = ifindex;
	f.tot_len = bpf_ntohs(ip6->payload_len);
	__builtin_memcpy(f.ipv6_src, &ip6->saddr, sizeof(f.ipv6_src));
	__builtin_memcpy(f.ipv6_dst, &ip6->daddr, sizeof(f.ipv6_dst));
	return bpf_fib_lookup(ctx, &f, sizeof(f), 0) == BPF_FIB_LKUP_RET_NOT_FWDED;
}

#define BND_PASS (-1)

static __always_inline __u32 bnd_kind_of_addr(const struct in6_addr *a)
{
	struct bnd_key key = { .prefixlen = 128 };
	struct bnd_dest *d;

	key.addr = *a;
	d = bpf_map_lookup_elem(&bnd_lpm, &key);
	return d ? d->kind : BND_NONE;
}

/* bnd_inside: a destination an external SID must not lead to (the SID
 * space, a node, an SF). */
static __always_inline int bnd_inside(__u32 kind)
{
	return kind == BND_SID || kind == BND_NODE || kind == BND_SF;
}

/* bnd_kind_of looks the destination up: one LPM lookup. */
static __always_inline __u32 bnd_kind_of(struct ipv6hdr *ip6)
{
	return bnd_kind_of_addr(&ip6->daddr);
}

/* The extension headers of a packet as the kernel will act on them. Unlike
 * lib/ipv6_walk.h (the proxies', which stop at the first routing header
 * that is not a valid SRH and drop), this walk goes on past every routing
 * header, of any type, valid or not: the kernel processes a type 4 header
 * that is not a well-formed SRH all the same (ipv6_srh_rcv checks only that
 * Segments Left fits the header), skips other types with Segments Left 0,
 * and looks for an SRH behind them (ipv6_find_hdr). */
struct bnd_walk {
	__u32 srh_off;	 /* offset of the first routing header of type 4, 0 if none */
	__u32 tp_off;	 /* the header after IPv6 and a leading hop-by-hop header: the one
			  * seg6local's HMAC check reads (skb_transport_header) */
	__u32 upper_off; /* the first header that is not an extension header */
	__u8 upper;	 /* its protocol number */
	__u8 nrh;	 /* routing headers, any type */
	__u8 nsrh;	 /* routing headers of type 4 (SRHs to the kernel, valid or not) */
	__u8 srh_bad;	 /* the first of them is not a well-formed SRH (ipv6_srh_valid) */
	__u8 sl;	 /* its Segments Left */
	__u8 fragment;	 /* a fragment header ends the walk (an SRH may follow it) */
	__u8 truncated;	 /* the walk ran past the packet */
	__u8 too_many;	 /* more than IPV6_EXT_MAX extension headers */
};

/* bnd_walk_ctx walks the extension headers from off (nexthdr names the
 * first) of a tc (xdp = 0) or XDP (xdp = 1) packet of len bytes: hop-by-hop,
 * destination options, AH (ipv6_find_hdr steps over it too) and routing
 * headers; a fragment header ends it. */
static __always_inline void bnd_walk_ctx(void *ctx, int xdp, __u32 len, __u32 off, __u8 nexthdr,
					 struct bnd_walk *w)
{
	int i;

	__builtin_memset(w, 0, sizeof(*w));
	w->tp_off = off;
	for (i = 0; i < IPV6_EXT_MAX; i++) {
		/* The first 8 bytes of any of these headers (each is at least
		 * 8 long): next header and length, and an SRH's fixed part. */
		struct ipv6_sr_hdr h;

		switch (nexthdr) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
		case IPPROTO_AH:
		case IPPROTO_ROUTING:
			if (ctx_load_bytes(ctx, xdp, off, &h, sizeof(h)) < 0) {
				w->truncated = 1;
				return;
			}
			if (nexthdr == IPPROTO_ROUTING) {
				w->nrh++;
				if (h.type == IPV6_SRCRT_TYPE_4 && !w->nsrh++) {
					w->srh_off = off;
					w->sl = h.segments_left;
					w->srh_bad = !ipv6_srh_valid(&h);
				}
			}
			off += ipv6_ext_len(nexthdr, h.hdrlen);
			if (i == 0 && nexthdr == IPPROTO_HOPOPTS)
				w->tp_off = off;
			nexthdr = h.nexthdr;
			continue;
		case IPPROTO_FRAGMENT:
			w->fragment = 1;
			return;
		default:
			w->upper_off = off;
			w->upper = nexthdr;
			if (off > len)
				w->truncated = 1;
			return;
		}
	}
	w->too_many = 1;
}

/* bnd_walk_skb and bnd_walk_xdp are bnd_walk_ctx as global functions: the
 * verifier checks each once, not once per path of every caller. */
__noinline int bnd_walk_skb(struct __sk_buff *skb, __u32 len, __u32 off, __u32 nexthdr,
			    struct bnd_walk *w)
{
	if (!w)
		return 0;
	bnd_walk_ctx(skb, 0, len, off, nexthdr, w);
	return 0;
}

__noinline int bnd_walk_xdp(struct xdp_md *ctx, __u32 len, __u32 off, __u32 nexthdr,
			    struct bnd_walk *w)
{
	if (!w)
		return 0;
	bnd_walk_ctx(ctx, 1, len, off, nexthdr, w);
	return 0;
}

/* bnd_seg_ctx is what bnd_seg_cb (a bpf_loop callback: the verifier checks
 * it once, not once per segment) reads and writes. */
struct bnd_seg_ctx {
	void *ctx; /* the __sk_buff or xdp_md */
	__u32 off; /* Segment List[0] */
	int r;	   /* BND_PASS or a drop reason */
};

/* bnd_seg_check looks Segment List[i] up: 0 to go on, 1 to stop (c->r set). */
static __always_inline long bnd_seg_check(struct bnd_seg_ctx *c, long rc, const struct in6_addr *a)
{
	__u32 k;

	if (rc < 0) {
		c->r = BND_DROP_MALFORMED;
		return 1;
	}
	k = bnd_kind_of_addr(a);
	if (bnd_inside(k)) {
		c->r = BND_DROP_EXTERNAL_NEXT;
		return 1;
	}
	return 0;
}

/* One callback per program type: each may call only its own load helper. */
static long bnd_seg_skb(__u64 i, void *data)
{
	struct bnd_seg_ctx *c = data;
	struct in6_addr a;

	if (i >= BND_SEGS_MAX)
		return 1;
	return bnd_seg_check(c, bpf_skb_load_bytes(c->ctx, c->off + i * 16, &a, sizeof(a)), &a);
}

static long bnd_seg_xdp(__u64 i, void *data)
{
	struct bnd_seg_ctx *c = data;
	struct in6_addr a;

	if (i >= BND_SEGS_MAX)
		return 1;
	return bnd_seg_check(c, bpf_xdp_load_bytes(c->ctx, c->off + i * 16, &a, sizeof(a)), &a);
}

/* bnd_external_ctx decides a packet to an external SID (w its walk): the
 * SID may be reached from outside, the rest of the domain may not through
 * it. Its SRH must be one well-formed routing header (the kernel's
 * decapsulating behaviours take a malformed one for none), every segment
 * left after the active one (Segment List[SL-1] .. [0], what the SID hands
 * the packet to next) external or outside the domain, and an IPv6 packet
 * inside (what a decapsulating SID delivers) not addressed to the SID
 * space or a domain node. */
static __always_inline int bnd_external_ctx(void *ctx, int xdp, const struct bnd_walk *w)
{
	struct bnd_seg_ctx c = { .ctx = ctx, .r = BND_PASS };
	struct in6_addr a;
	__u32 k;

	if (w->truncated || w->too_many || w->fragment)
		return BND_DROP_MALFORMED;
	if (w->nrh) {
		if (w->nrh != 1 || !w->nsrh || w->srh_bad)
			return BND_DROP_MALFORMED;
		c.off = w->srh_off + IPV6_SRH_FIXED_LEN;
		if (xdp)
			bpf_loop(w->sl, bnd_seg_xdp, &c, 0);
		else
			bpf_loop(w->sl, bnd_seg_skb, &c, 0);
		if (c.r != BND_PASS)
			return c.r;
	}
	if (w->upper == IPPROTO_IPV6) {
		if (ctx_load_bytes(ctx, xdp, w->upper_off + offsetof(struct ipv6hdr, daddr), &a, sizeof(a)) < 0)
			return BND_DROP_MALFORMED;
		k = bnd_kind_of_addr(&a);
		if (bnd_inside(k))
			return BND_DROP_EXTERNAL_NEXT;
	}
	return BND_PASS;
}

__noinline int bnd_external_skb(struct __sk_buff *skb, struct bnd_walk *w)
{
	if (!w)
		return BND_DROP_MALFORMED;
	return bnd_external_ctx(skb, 0, w);
}

__noinline int bnd_external_xdp(struct xdp_md *ctx, struct bnd_walk *w)
{
	if (!w)
		return BND_DROP_MALFORMED;
	return bnd_external_ctx(ctx, 1, w);
}

/* bnd_in is the ingress decision for the IPv6 packet ip6 at l3 of ctx (tc
 * or XDP, len bytes, arrived on ifindex): a drop reason or BND_PASS. The
 * common case (no extension header) is one LPM lookup. */
static __always_inline int bnd_in(void *ctx, int xdp, __u32 len, __u32 ifindex, __u32 l3,
				  struct ipv6hdr *ip6)
{
	struct bnd_walk w;
	__u32 kind = bnd_kind_of(ip6);
	__u8 nh = ip6->nexthdr;

	/* An SF behind a proxy: nothing from outside, SRv6 or not. */
	if (kind == BND_SF)
		return BND_DROP_TO_SF;
	if (!ipv6_ext(nh)) {
		/* No extension header, so no SRH: the fast path. */
		if (kind == BND_SID)
			return BND_DROP_SID;
		if (kind != BND_EXTERNAL || nh != IPPROTO_IPV6)
			return BND_PASS;
	}
	if (xdp)
		bnd_walk_xdp(ctx, len, l3 + sizeof(struct ipv6hdr), nh, &w);
	else
		bnd_walk_skb(ctx, len, l3 + sizeof(struct ipv6hdr), nh, &w);
	if (kind == BND_SID)
		return w.nsrh ? BND_DROP_SID_SRH : BND_DROP_SID;
	if (kind == BND_EXTERNAL)
		return xdp ? bnd_external_xdp(ctx, &w) : bnd_external_skb(ctx, &w);
	/* To a node: every routing header counts, whatever its type and
	 * however malformed (the kernel processes a type 4 one as an SRH);
	 * and an SRH could hide behind a fragment header (the kernel
	 * processes it after reassembly) or unreadable headers. */
	if (!w.nrh && !w.truncated && !w.too_many && !w.fragment)
		return BND_PASS;
	ip6 = ctx_ip6(ctx, xdp, l3); /* re-derive: the walk called helpers */
	if (!ip6)
		return BND_PASS;
	if (kind != BND_NODE && !local_dest(ctx, ifindex, ip6))
		return BND_PASS; /* transit between outside hosts */
	return w.nsrh ? BND_DROP_SRH_NODE : BND_DROP_MALFORMED;
}

/* bnd_sample_match reports whether the packet (addresses a, s; proto;
 * ports, when has_ports) matches selector c. */
static __always_inline int bnd_sample_match(const struct bnd_sample_sel *c, __u32 family, __u32 ifindex,
					    const __u32 *a, const __u32 *s, __u32 proto, int has_ports,
					    __u16 sport, __u16 dport)
{
	int i;

	if (c->family != family || (c->ifindex && c->ifindex != ifindex))
		return 0;
	for (i = 0; i < 4; i++)
		if ((a[i] & c->dst_mask[i]) != c->dst[i] || (s[i] & c->src_mask[i]) != c->src[i])
			return 0;
	if (c->proto && c->proto != proto)
		return 0;
	if (c->sport_hi && (!has_ports || sport < c->sport_lo || sport > c->sport_hi))
		return 0;
	if (c->dport_hi && (!has_ports || dport < c->dport_lo || dport > c->dport_hi))
		return 0;
	return 1;
}

/* bnd_sample_skb samples the packet at l3 (IPv6 when v6, else IPv4) that
 * boundary_in lets in: the first selector it matches counts it, and marks
 * it when it is the 1st, (rate+1)-th, ... A global function: verified
 * once, called only while some selector is set. */
__noinline int bnd_sample_skb(struct __sk_buff *skb, __u32 l3, __u32 v6)
{
	struct bnd_sample_event *ev;
	struct bnd_sample_cfg *cfg;
	struct bnd_sample_ctr *ctr;
	__u32 a[4] = {}, s[4] = {}, zero = 0, proto, tp, family = v6 ? 6 : 4, ifindex = skb->ingress_ifindex;
	__u16 ports[2] = {};
	int has_ports = 0, i;
	__u64 n;

	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;

	/* A frame whose tag, pulled into skb->vlan_tci before TCX, has a
	 * non-zero VID is not a packet of this device: after TCX the kernel
	 * hands it to that VLAN's device (its own pass through TCX, its
	 * ifindex the rules' iif: counted there, once) or, with none, drops
	 * it. Counted here it was counted twice, or counted and marked
	 * without ever leaving. A priority tag (VID 0) stays on this device. */
	if (skb->vlan_present && (skb->vlan_tci & BND_VLAN_VID))
		return 0;
	cfg = bpf_map_lookup_elem(&bnd_sample, &zero);
	if (!cfg)
		return 0;
	/* The headers are read straight from the linear data (boundary_in
	 * found the IPv6 header there): no helper call on a packet not
	 * sampled (with bpf_skb_load_bytes a selector cost ~85 ns a packet,
	 * BenchmarkBoundaryInSampling). */
	/* Untagged frames only (a tag in the data, not in skb->vlan_tci, is
	 * rare; its packet is not sampled): a constant offset, no helper. */
	if (l3 != sizeof(struct ethhdr))
		return 0;
	/* Verifier: a variable l3, bounded in a test, came back from the
	 * stack without its bound; a constant needs none. */
	l3 = sizeof(struct ethhdr);
	if (v6) {
		struct ipv6hdr *h = data + l3;

		if ((void *)(h + 1) > end)
			return 0;
		__builtin_memcpy(a, &h->daddr, 16);
		__builtin_memcpy(s, &h->saddr, 16);
		proto = h->nexthdr;
		tp = l3 + sizeof(*h);
	} else {
		struct iphdr *h = data + sizeof(struct ethhdr); /* untagged only */

		if ((void *)(h + 1) > end)
			return 0;
		a[0] = h->daddr;
		s[0] = h->saddr;
		proto = h->protocol;
		tp = l3 + h->ihl * 4;
		if (h->frag_off & bpf_htons(0x3fff)) /* a fragment: no ports to match */
			proto = proto | 0x100;
	}
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
		/* Verifier: tp is at most l3 + 60 (IPv4 options). */
		__u16 *pp = data + (tp & 0x7f);

		if ((void *)(pp + 2) <= end) {
			ports[0] = pp[0];
			ports[1] = pp[1];
			has_ports = 1;
		}
	}
	proto &= 0xff;
	for (i = 0; i < BND_SAMPLE_MAX; i++) {
		const struct bnd_sample_sel *c = &cfg->sel[i];
		__u32 slot;

		if (i >= cfg->n)
			return 0;
		if (!bnd_sample_match(c, family, ifindex, a, s, proto, has_ports,
				      bpf_ntohs(ports[0]), bpf_ntohs(ports[1])))
			continue;
		slot = c->slot;
		if (slot >= BND_SAMPLE_MAX)
			return 0; /* a chain not sampled whose rule comes first */
		ctr = bpf_map_lookup_elem(&bnd_sample_ctrs, &slot);
		if (!ctr)
			return 0;
		n = __sync_fetch_and_add(&ctr->seen, 1);
		if (!c->rate || n % c->rate)
			return 0;
		skb->mark = c->mark;
		__sync_fetch_and_add(&ctr->marked, 1);
		ev = bpf_ringbuf_reserve(&bnd_sample_events, sizeof(*ev), 0);
		if (!ev)
			return 0;
		ev->ts = bpf_ktime_get_ns();
		ev->slot = slot;
		ev->ifindex = ifindex;
		/* A shorter packet: zeros, as the taps read it after the SRH. */
		if (bpf_skb_load_bytes(skb, l3 + (c->id_off & 0xff), ev->id, BND_SAMPLE_ID_LEN) < 0)
			__builtin_memset(ev->id, 0, BND_SAMPLE_ID_LEN);
		bpf_ringbuf_submit(ev, 0);
		return 0;
	}
	return 0;
}

/* bnd_sampling reports whether some selector is set: one array lookup,
 * inlined by the verifier. */
static __always_inline int bnd_sampling(void)
{
	__u32 zero = 0;
	struct bnd_sample_cfg *cfg = bpf_map_lookup_elem(&bnd_sample, &zero);

	return cfg && cfg->n;
}

static __always_inline int boundary(struct __sk_buff *skb, int ingress)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6;
	int l3 = sizeof(struct ethhdr), r;

	if (skb->protocol != bpf_htons(ETH_P_IPV6)) {
		/* IPv4 (untagged) is not filtered, only sampled. */
		if (skb->protocol == bpf_htons(ETH_P_IP)) {
			if (ingress && bnd_sampling())
				bnd_sample_skb(skb, sizeof(struct ethhdr), 0);
			return TC_ACT_UNSPEC;
		}
		/* Tags in the data (the first one of a stack is in
		 * skb->vlan_tci already, skb->protocol names the next). */
		if (!eth_type_vlan(skb->protocol))
			return TC_ACT_UNSPEC;
		l3 = l3_off(data, end);
		if (l3 < 0)
			return ingress ? bnd_drop(skb, BND_DROP_VLAN) : TC_ACT_UNSPEC;
		if (!l3)
			return TC_ACT_UNSPEC;
	}
	ip6 = ip6_at(data, end, l3);
	if (!ip6)
		return TC_ACT_UNSPEC; /* the stack drops a truncated header */
	if (!ingress)
		return bnd_kind_of(ip6) == BND_SID ? bnd_drop(skb, BND_DROP_LEAK_SID) : TC_ACT_UNSPEC;
	r = bnd_in(skb, 0, skb->len, skb->ingress_ifindex, l3, ip6);
	if (r != BND_PASS)
		return bnd_drop(skb, r);
	if (bnd_sampling())
		bnd_sample_skb(skb, l3, 1);
	return TC_ACT_UNSPEC;
}

/* hmac_reason mirrors the kernel's seg6_hmac_validate_skb with
 * seg6_require_hmac = 1 on the SRH at off: the drop reason, or -1 when the
 * kernel decides (the digest). Stricter than the kernel in one way: the
 * HMAC TLV must be the only TLV (the header ends with it, as every
 * headend segchain configures writes it). A TLV the kernel's SRH
 * validation refuses after it would make the decapsulating behaviours
 * take the SRH for none and skip the HMAC check. */
static __always_inline int hmac_reason(struct __sk_buff *skb, __u32 off)
{
	struct ipv6_sr_hdr srh;
	struct sr6_tlv_hmac tlv;
	__u32 key;

	if (bpf_skb_load_bytes(skb, off, &srh, sizeof(srh)) < 0)
		return BND_DROP_HMAC_MALFORMED;
	if (!(srh.flags & SR6_FLAG1_HMAC))
		return BND_DROP_HMAC_MISSING;
	if (srh.hdrlen != ((__u32)srh.first_segment + 1) * 2 + 5 ||
	    bpf_skb_load_bytes(skb, off + IPV6_SRH_FIXED_LEN + ((__u32)srh.first_segment + 1) * 16,
			       &tlv, sizeof(tlv)) < 0 ||
	    tlv.tlvhdr.type != SR6_TLV_HMAC || tlv.tlvhdr.len != BND_HMAC_TLV_LEN)
		return BND_DROP_HMAC_MALFORMED;
	key = bpf_ntohl(tlv.hmackeyid);
	if (!bpf_map_lookup_elem(&bnd_hmac_keys, &key))
		return BND_DROP_HMAC_UNKNOWN_KEY;
	return -1;
}

/* hmac_walk_reason decides a packet to a signed SID from its walk: what
 * the kernel would accept without checking the HMAC, or check on another
 * header than the one it acts on, is dropped; -1 for hmac_reason's checks. */
static __always_inline int hmac_walk_reason(const struct bnd_walk *w)
{
	if (w->truncated || w->too_many)
		return BND_DROP_HMAC_MALFORMED;
	/* No SRH at all: the kernel's decapsulating behaviours check the HMAC
	 * only when there is an SRH, so a signed chain's End.DX6 would take
	 * a bare IPv6-in-IPv6 packet. A signed chain always has an SRH. */
	if (!w->nrh)
		return BND_DROP_HMAC_MISSING;
	/* A routing header that is not a well-formed SRH: the decapsulating
	 * behaviours take it for no SRH and skip the HMAC check. */
	if (!w->nsrh || w->srh_bad)
		return BND_DROP_HMAC_MALFORMED;
	/* The kernel checks the HMAC of the header right after IPv6 (and a
	 * hop-by-hop header), but acts on the first routing header (End: the
	 * first with Segments Left > 0): a signed copy in a destination
	 * options header, or a signed SRH with Segments Left 0 before another
	 * one, would vouch for a forged SRH. */
	if (w->nrh != 1 || w->srh_off != w->tp_off)
		return BND_DROP_HMAC_MISPLACED;
	return -1;
}

/* hmac_in runs on every interface of a node hosting SIDs of signed chains
 * (after the boundary program where both are attached). For a packet
 * addressed to one of them it drops, and counts by reason, what the
 * kernel's HMAC check would drop without saying why, and what the kernel
 * would let through unchecked; a packet whose only routing header is a
 * well-formed SRH right where the kernel looks, with a well formed TLV and
 * a known key, goes on to the kernel, which checks the digest (a wrong one
 * counts in the SID's errors). */
SEC("tc")
int hmac_in(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct bnd_key key = { .prefixlen = 128 };
	struct bnd_walk w;
	struct ipv6hdr *ip6;
	int l3 = sizeof(struct ethhdr), r;

	if (skb->protocol != bpf_htons(ETH_P_IPV6)) {
		if (!eth_type_vlan(skb->protocol))
			return TC_ACT_UNSPEC;
		l3 = l3_off(data, end);
		if (l3 < 0)
			return bnd_drop(skb, BND_DROP_VLAN);
		if (!l3)
			return TC_ACT_UNSPEC;
	}
	ip6 = ip6_at(data, end, l3);
	if (!ip6)
		return TC_ACT_UNSPEC;
	/* Fast path: a transport header right after IPv6 is not for a SID. */
	if (!ipv6_ext(ip6->nexthdr) && ip6->nexthdr != IPPROTO_IPV6 &&
	    ip6->nexthdr != IPPROTO_IPIP && ip6->nexthdr != BND_NEXTHDR_ETHERNET)
		return TC_ACT_UNSPEC;
	key.addr = ip6->daddr;
	if (!bpf_map_lookup_elem(&bnd_hmac_sids, &key))
		return TC_ACT_UNSPEC;
	bnd_walk_skb(skb, skb->len, l3 + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	r = hmac_walk_reason(&w);
	if (r < 0)
		r = hmac_reason(skb, w.srh_off);
	return r < 0 ? TC_ACT_UNSPEC : bnd_drop(skb, r);
}

/* boundary_xdp is boundary_in in XDP: the same decisions, counted under
 * the same interface and reasons, with boundary_out on TCX egress. segchain
 * does not attach it (docs/security.md, Cost: on veth, native XDP turns off
 * GSO on the peer and costs stack traffic far more than TCX); segchain perf
 * boundary measures it. XDP sees every tag in the data (unless the NIC
 * strips it: then it is gone from the frame). */
SEC("xdp")
int boundary_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6;
	__u32 len;
	int l3, r;

	l3 = l3_off(data, end);
	if (!l3)
		return XDP_PASS;
	len = bpf_xdp_get_buff_len(ctx); /* with the fragments of a multi-buffer frame */
	if (l3 < 0) {
		r = BND_DROP_VLAN;
	} else {
		ip6 = ip6_at(data, end, l3);
		if (!ip6)
			return XDP_PASS;
		r = bnd_in(ctx, 1, len, ctx->ingress_ifindex, l3, ip6);
		if (r == BND_PASS)
			return XDP_PASS;
	}
	bnd_count(ctx->ingress_ifindex, len, r);
	return XDP_DROP;
}

SEC("tc")
int boundary_in(struct __sk_buff *skb)
{
	return boundary(skb, 1);
}

SEC("tc")
int boundary_out(struct __sk_buff *skb)
{
	return boundary(skb, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";

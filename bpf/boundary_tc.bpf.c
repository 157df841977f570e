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
 *     would process the SRH and forward it into the domain.
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
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <linux/seg6_hmac.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/cursor.h"
#include "lib/ipv6_walk.h"

#ifndef TC_ACT_UNSPEC
#define TC_ACT_UNSPEC (-1)
#endif

#define BND_LPM_MAX 4096	/* locators, external SIDs and node addresses */
#define BND_COUNTERS_MAX 1024	/* (interface, direction, reason) counters */
#define BND_HMAC_SIDS_MAX 1024	/* local SIDs of signed chains */
#define BND_HMAC_KEYS_MAX 1024	/* the domain's HMAC key ids */
#define BND_NEXTHDR_ETHERNET 143 /* RFC 8986: an Ethernet frame follows (no uapi name) */
#define BND_HMAC_TLV_LEN 38	/* sr6_tlv_hmac without type and length, as the kernel requires */

/* What a destination prefix is (bnd_lpm's value). */
enum bnd_kind {
	BND_NONE,
	BND_SID,      /* a locator: the domain's SID space */
	BND_EXTERNAL, /* a SID declared reachable from outside */
	BND_NODE,     /* an address of a domain node */
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
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS;
}

/* ip6_at returns the IPv6 header after the Ethernet header of the packet
 * data..end, or NULL. */
static __always_inline struct ipv6hdr *ip6_at(void *data, void *end)
{
	struct cursor c = { .pos = data, .end = end };

	if (!cursor_eth(&c))
		return 0;
	return cursor_ipv6(&c);
}

/* ctx_ip6 is ip6_at for a tc (xdp = 0) or XDP (xdp = 1) context. */
#define ctx_ip6(ctx, xdp)                                                              \
	((xdp) ? ip6_at((void *)(long)((struct xdp_md *)(ctx))->data,                  \
			(void *)(long)((struct xdp_md *)(ctx))->data_end)              \
	       : ip6_at((void *)(long)((struct __sk_buff *)(ctx))->data,               \
			(void *)(long)((struct __sk_buff *)(ctx))->data_end))

static __always_inline struct ipv6hdr *ip6_of(struct __sk_buff *skb)
{
	return ctx_ip6(skb, 0);
}

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

/* bnd_kind_of looks the destination up: one LPM lookup. */
static __always_inline __u32 bnd_kind_of(struct ipv6hdr *ip6)
{
	struct bnd_key key = { .prefixlen = 128 };
	struct bnd_dest *d;

	key.addr = ip6->daddr;
	d = bpf_map_lookup_elem(&bnd_lpm, &key);
	return d ? d->kind : BND_NONE;
}

/* bnd_in is the ingress decision for the IPv6 packet ip6 of ctx (tc or
 * XDP, len bytes, arrived on ifindex): a drop reason or BND_PASS. The
 * common case (no extension header) is one LPM lookup. */
static __always_inline int bnd_in(void *ctx, int xdp, __u32 len, __u32 ifindex, struct ipv6hdr *ip6)
{
	struct ipv6_walk w;
	__u32 kind = bnd_kind_of(ip6);

	if (kind == BND_EXTERNAL)
		return BND_PASS;
	if (!ipv6_ext(ip6->nexthdr) && ip6->nexthdr != IPPROTO_FRAGMENT)
		/* No extension header, so no SRH: the fast path. */
		return kind == BND_SID ? BND_DROP_SID : BND_PASS;
	if (xdp)
		ipv6_walk_xdp(ctx, len, sizeof(struct ethhdr) + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	else
		ipv6_walk_skb(ctx, len, sizeof(struct ethhdr) + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	if (kind == BND_SID)
		return w.srh_off ? BND_DROP_SID_SRH : BND_DROP_SID;
	/* An SRH could hide behind a fragment header (the kernel processes
	 * it after reassembly), a second SRH or unreadable headers. */
	if (!w.srh_off && !w.truncated && !w.too_many && !w.fragment && !w.multi_srh)
		return BND_PASS;
	ip6 = ctx_ip6(ctx, xdp); /* re-derive: the walk called helpers */
	if (!ip6)
		return BND_PASS;
	if (kind != BND_NODE && !local_dest(ctx, ifindex, ip6))
		return BND_PASS; /* transit between outside hosts */
	return w.srh_off && !w.multi_srh ? BND_DROP_SRH_NODE : BND_DROP_MALFORMED;
}

static __always_inline int boundary(struct __sk_buff *skb, int ingress)
{
	struct ipv6hdr *ip6;
	int r;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	ip6 = ip6_of(skb);
	if (!ip6)
		return TC_ACT_UNSPEC; /* the stack drops a truncated header */
	if (!ingress)
		return bnd_kind_of(ip6) == BND_SID ? bnd_drop(skb, BND_DROP_LEAK_SID) : TC_ACT_UNSPEC;
	r = bnd_in(skb, 0, skb->len, skb->ingress_ifindex, ip6);
	return r == BND_PASS ? TC_ACT_UNSPEC : bnd_drop(skb, r);
}

/* hmac_reason mirrors the kernel's seg6_hmac_validate_skb with
 * seg6_require_hmac = 1 (the kernel looks at the first TLV after the
 * segments only): the drop reason, or -1 when the kernel decides (the
 * digest). */
static __always_inline int hmac_reason(struct __sk_buff *skb, const struct ipv6_walk *w)
{
	struct ipv6_sr_hdr srh;
	struct sr6_tlv_hmac tlv;
	__u32 key;

	if (bpf_skb_load_bytes(skb, w->srh_off, &srh, sizeof(srh)) < 0)
		return BND_DROP_HMAC_MALFORMED;
	if (!(srh.flags & SR6_FLAG1_HMAC))
		return BND_DROP_HMAC_MISSING;
	if (srh.hdrlen < ((__u32)srh.first_segment + 1) * 2 + 5 ||
	    bpf_skb_load_bytes(skb, w->srh_off + IPV6_SRH_FIXED_LEN + ((__u32)srh.first_segment + 1) * 16,
			       &tlv, sizeof(tlv)) < 0 ||
	    tlv.tlvhdr.type != SR6_TLV_HMAC || tlv.tlvhdr.len != BND_HMAC_TLV_LEN)
		return BND_DROP_HMAC_MALFORMED;
	key = bpf_ntohl(tlv.hmackeyid);
	if (!bpf_map_lookup_elem(&bnd_hmac_keys, &key))
		return BND_DROP_HMAC_UNKNOWN_KEY;
	return -1;
}

/* hmac_in runs on every interface of a node hosting SIDs of signed chains
 * (after the boundary program where both are attached). For an SRH
 * addressed to one of them it drops, and counts by reason, what the
 * kernel's HMAC check would drop without saying why; a packet whose TLV
 * is well formed with a known key goes on to the kernel, which checks the
 * digest (a wrong one counts in the SID's errors). */
SEC("tc")
int hmac_in(struct __sk_buff *skb)
{
	struct bnd_key key = { .prefixlen = 128 };
	struct ipv6_walk w;
	struct ipv6hdr *ip6;
	int r;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	ip6 = ip6_of(skb);
	if (!ip6)
		return TC_ACT_UNSPEC;
	/* Fast path: a transport header right after IPv6 is not for a SID. */
	if (!ipv6_ext(ip6->nexthdr) && ip6->nexthdr != IPPROTO_IPV6 &&
	    ip6->nexthdr != IPPROTO_IPIP && ip6->nexthdr != BND_NEXTHDR_ETHERNET)
		return TC_ACT_UNSPEC;
	key.addr = ip6->daddr;
	if (!bpf_map_lookup_elem(&bnd_hmac_sids, &key))
		return TC_ACT_UNSPEC;
	ipv6_walk_ext(skb, sizeof(struct ethhdr) + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	if (w.bad_rh || w.truncated || w.too_many || w.multi_srh)
		return TC_ACT_UNSPEC; /* the kernel rejects these itself */
	/* No SRH at all: the kernel's decapsulating behaviours check the HMAC
	 * only when there is an SRH, so a signed chain's End.DX6 would take
	 * a bare IPv6-in-IPv6 packet. A signed chain always has an SRH. */
	if (!w.srh_off)
		return bnd_drop(skb, BND_DROP_HMAC_MISSING);
	r = hmac_reason(skb, &w);
	return r < 0 ? TC_ACT_UNSPEC : bnd_drop(skb, r);
}

/* boundary_xdp is boundary_in in XDP: the same decisions, counted under
 * the same interface and reasons, with boundary_out on TCX egress. segchain
 * does not attach it (docs/security.md, Cost: on veth, native XDP turns off
 * GSO on the peer and costs stack traffic far more than TCX); segchain perf
 * boundary measures it. */
SEC("xdp")
int boundary_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	__u32 len;
	int r;

	if (data + sizeof(*eth) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	ip6 = ip6_at(data, end);
	if (!ip6)
		return XDP_PASS;
	len = bpf_xdp_get_buff_len(ctx); /* with the fragments of a multi-buffer frame */
	r = bnd_in(ctx, 1, len, ctx->ingress_ifindex, ip6);
	if (r == BND_PASS)
		return XDP_PASS;
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

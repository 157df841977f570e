// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain End.AN.NF: the node's unchanged netfilter rule set (nftables,
 * iptables, conntrack, NAT) runs on the inner packet of SRv6 traffic, with
 * the SID's ARGS bits as the packet mark; then End is applied and the
 * chain continues. The kernel has no such behaviour (the research patched
 * seg6local); segchain builds it from two tc programs and a veth pair
 * inside the node (the "netfilter loop", NF_LOOP_OUT/NF_LOOP_IN below):
 *
 *  nf_in  (TCX ingress, every interface): a packet whose IPv6 DA falls in
 *         an End.AN.NF SID prefix (nf_sids, LPM) is checked (SRH, SL > 0,
 *         encap mode), its outer IPv6 header + extension headers + SRH are
 *         stashed in a slot of nf_slots with End already applied (SL--,
 *         DA <- next SID, hop limit - 1), the packet is decapsulated, its
 *         mark set to ARGS, the slot's tag put in skb->tc_index (no rule
 *         can match on it and nothing on the path clears it), and it is
 *         redirected into the ingress of the loop's inner end. There the
 *         stack sees a plain IPv4/IPv6 packet: PREROUTING, a policy rule
 *         "iif <loop-in> lookup <table>" whose default route points out of
 *         the loop's outer end, FORWARD, POSTROUTING.
 *  nf_out (TCX egress of the loop's outer end): what netfilter accepted
 *         arrives here; the tag finds the slot, the stashed headers are
 *         pushed back (payload length and the Next Header naming the
 *         inner packet fixed: NAT may have changed the size), the original mark restored, and the
 *         packet forwarded by FIB lookup, or handed to the stack through
 *         the ingress of the outer end (a local next SID, an lwt route ...).
 *
 * Every drop returns through count_drop with a reason (enum
 * nf_drop_reason); packets netfilter drops never reach nf_out and are
 * counted by the control plane as in - accepted - malformed. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/cursor.h"
#include "lib/ipv6_walk.h"
#include "lib/drop.h"
#include "lib/pktcopy.h"
#include "lib/csid.h"
#include <bpf/bpf_core_read.h>

#define NF_MAX_SIDS 64	   /* End.AN.NF SID prefixes per node */
#define NF_SLOTS 8192	   /* stashed outer headers in flight, all SIDs */
#define NF_HDR_MAX 512	   /* outer IPv6 + extension headers + SRH, bytes */
#define NF_TAG_BIT 0x8000  /* tc_index: this packet carries a slot tag */
#define NF_LOOP_STATS NF_MAX_SIDS /* nf_stats entry of nf_out's tagless drops */

#ifndef TC_ACT_UNSPEC
#define TC_ACT_UNSPEC (-1)
#endif

enum nf_drop_reason {
	NF_DROP_TRUNCATED,	/* "truncated": headers past the end of the packet */
	NF_DROP_NO_SRH,		/* "no-srh": addressed to the SID without an SRH */
	NF_DROP_BAD_SRH,	/* "bad-srh": wrong routing type, bad hdr-len, SL > last entry, two SRHs */
	NF_DROP_BAD_EXT,	/* "too-many-ext-hdrs": too many extension headers */
	NF_DROP_FRAGMENT,	/* "fragment": outer fragment header */
	NF_DROP_SL_ZERO,	/* "sl-zero": Segments Left is 0: no next segment to continue to */
	NF_DROP_INSERT,		/* "insert-mode": the SRH is not followed by an IPv4/IPv6 packet */
	NF_DROP_BAD_INNER,	/* "bad-inner": the inner header is not what the SRH says */
	NF_DROP_HDR_TOO_BIG,	/* "header-too-big": outer headers longer than NF_HDR_MAX */
	NF_DROP_HOP_LIMIT,	/* "hop-limit": outer hop limit <= 1 */
	NF_DROP_NO_LOOP,	/* "no-loop": the netfilter loop is not configured */
	NF_DROP_ADJUST_ROOM,	/* "adjust-room": the kernel refused to decapsulate or re-encapsulate */
	NF_DROP_NO_TAG,		/* "no-tag": a packet left the loop without a slot tag (not ours) */
	NF_DROP_STALE,		/* "stale-slot": the slot was reused before the packet came back */
	NF_DROP_FAMILY,		/* "family": the packet came back neither IPv4 nor IPv6 */
	NF_DROP_INTERNAL,	/* "internal" */
	NF_DROP_CSID_PADDING,	/* "csid-padding": a uSID container with a non-zero C-SID after its end-of-container zero */
	NF_DROP_VLAN_STACK,	/* "vlan-stack": more stacked priority tags (VID 0) than nf_in looks through */
	NF_DROP_VLAN_POP,	/* "vlan-pop": the kernel refused to remove a SID's packet's priority tags */
	NF_DROP_MAX,
};

/* The kernel's types nf_out reads the routing generation through
 * (fib6_sernum of the packet's namespace), relocated by CO-RE against the
 * running kernel's BTF; "___nf" flavours, as only these fields are
 * declared. fib6_sernum changes with every IPv6 route added or replaced
 * (fib6_add), every policy rule added or deleted (fib6_rule_flush_cache ->
 * rt_genid_bump_ipv6), a multipath next hop going dead and a nexthop
 * object replaced; a route deleted leaves it alone (the kernel's own
 * cached routes notice by their node) but takes one from
 * rt6_stats->fib_rt_entries. The pair changes with whatever can change
 * the answer of the lookup nf_out caches. */
typedef struct {
	int counter;
} nf_atomic_t;

struct rt6_statistics___nf {
	__u32 fib_rt_entries;
} __attribute__((preserve_access_index));

struct netns_ipv6___nf {
	struct rt6_statistics___nf *rt6_stats;
	nf_atomic_t fib6_sernum;
} __attribute__((preserve_access_index));

struct net___nf {
	struct netns_ipv6___nf ipv6;
} __attribute__((preserve_access_index));

struct net_device___nf {
	struct {
		struct net___nf *net;
	} nd_net;
} __attribute__((preserve_access_index));

struct sk_buff___nf {
	struct net_device___nf *dev;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* nf_fib_cache_on: 0 turns the next-hop cache off (every packet takes the
 * full bpf_fib_lookup, the path before issue #32; the tests compare
 * both). Set at load time. */
volatile const __u32 nf_fib_cache_on = 1;

#define NF_FIB_CACHE 256 /* per-CPU direct-mapped entries */
/* An entry's lifetime in ns (100 ms; the tests set it longer): what moves
 * neither counter reaches the cache within it — a neighbour's new MAC or
 * its failure, a device's new address, the forwarding sysctl turned off. */
volatile const __u64 nf_fib_cache_ns = 100000000;

/* One cached answer of nf_out's FIB lookup: for (iif, src, dst) under
 * routing generation gen, forward out of oif with these MACs. Only
 * BPF_FIB_LKUP_RET_SUCCESS answers (a valid neighbour) are cached. Not the
 * next hop for bpf_redirect_neigh: the skb still holds the loop route's
 * dst, and a packet the neighbour layer queues (an unresolved neighbour)
 * is sent, once resolved, through that dst's neighbour (the loop's, with
 * its MACs) on the new device; the full lookup's no-neighbour path gives
 * the helper no next hop, so it sets a dst of its own. */
struct nf_fib_ent {
	__u32 gen;	/* fib6_sernum */
	__u32 routes;	/* rt6_stats->fib_rt_entries */
	__u64 expires;	/* bpf_ktime_get_coarse_ns: a bound on staleness for what neither counts */
	__u32 iif;
	__u32 oif;
	__u8 src[16];
	__u8 dst[16];
	__u8 dmac[6];
	__u8 smac[6];
	__u32 valid;
};

/* addr_eq compares two IPv6 addresses (no memcmp in BPF). */
static __always_inline int addr_eq(const void *a, const void *b)
{
	const __u32 *x = a, *y = b;

	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

/* Value of nf_sids. */
struct nf_sid {
	__u32 id;	 /* index of the SID's nf_stats entry */
	__u32 args_bits; /* rightmost bits of the DA that are ARGS (0..32) */
	/* A uSID (RFC 9800 NEXT-C-SID, lib/csid.h): the prefix is
	 * block:uSID::/(lblen+nflen); End shifts the container while it
	 * holds more uSIDs. 0/0: a full SID. */
	__u8 csid_lblen;
	__u8 csid_nflen;
	__u16 _pad;
};

struct nf_sid_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* nf_cfg[0]: the netfilter loop, written by the control plane. */
struct nf_cfg {
	__u32 in_ifindex;  /* NF_LOOP_IN: inner packets enter the stack here */
	__u32 out_ifindex; /* NF_LOOP_OUT: they leave it here, into nf_out */
	__u8 in_mac[6];	   /* the destination MAC a frame for NF_LOOP_IN needs */
	__u8 out_mac[6];   /* ... for NF_LOOP_OUT (stack hand-off) */
};

/* One stashed outer header, End already applied. */
struct nf_slot {
	__u32 tag;	/* the tc_index of the packet it belongs to */
	__u32 id;	/* SID (nf_stats index) */
	__u32 ifindex;	/* where the SRv6 packet arrived (FIB lookup input) */
	__u32 mark;	/* its mark before ARGS replaced it */
	__u16 len;	/* bytes of hdr */
	__u16 srh_off;	/* offset of the SRH in hdr */
	__u16 nh_off;	/* offset in hdr of the Next Header byte naming the inner packet
			 * (the SRH's, or a destination options header's after it) */
	__u16 _pad;
	__u8 hdr[NF_HDR_MAX];
};

struct nf_stats {
	__u64 packets;	/* addressed to the SID */
	__u64 bytes;
	__u64 to_netfilter; /* decapsulated and handed to netfilter */
	__u64 returned;	/* came back out of the loop (netfilter accepted them) */
	__u64 accepted;	/* came back from netfilter, re-encapsulated, sent on */
	__u64 to_stack;	/* of those, handed to the stack (the FIB could not forward) */
	__u64 drops[NF_DROP_MAX];
};

const enum nf_drop_reason *unused_drop_reason __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, NF_MAX_SIDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nf_sid_key);
	__type(value, struct nf_sid);
} nf_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nf_cfg);
} nf_cfg_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NF_SLOTS);
	__type(key, __u32);
	__type(value, struct nf_slot);
} nf_slots SEC(".maps");

/* nf_next[0]: the slot allocator, a free-running counter. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nf_next SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_FIB_CACHE);
	__type(key, __u32);
	__type(value, struct nf_fib_ent);
} nf_fib_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NF_MAX_SIDS + 1);
	__type(key, __u32);
	__type(value, struct nf_stats);
} nf_stats_map SEC(".maps");

static __always_inline int drop(struct nf_stats *st, __u32 reason)
{
	count_drop(st, reason, NF_DROP_MAX);
	return TC_ACT_SHOT;
}

/* ttl_up adds one to the inner TTL / hop limit (below 255): the loop makes
 * the stack forward the inner packet once, which takes one away again, so
 * the packet leaves End.AN.NF with the TTL it arrived with, as End leaves
 * it. IPv4's header checksum follows (RFC 1624, as ip_decrease_ttl the
 * other way). Direct packet access. */
static __always_inline int ttl_up(struct __sk_buff *skb, int v4)
{
	__u32 need = ETH_HLEN + (v4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr));
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;

	/* A non-linear skb whose inner header is not in the head (rare: the
	 * stack and GRO pull headers): pull it in first. */
	if (data + need > end) {
		if (bpf_skb_pull_data(skb, need) < 0)
			return -1;
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
	}
	if (v4) {
		struct iphdr *ip = data + ETH_HLEN;
		__u32 c;

		if ((void *)(ip + 1) > end)
			return -1;
		if (ip->ttl == 255)
			return 0;
		/* ttl is the high byte of its checksum word: +0x0100 in the
		 * word is -0x0100 in the checksum (+0xfeff, end-around carry). */
		c = (__u32)ip->check + bpf_htons(0xfeff);
		ip->check = (__u16)(c + (c >> 16));
		ip->ttl++;
		return 0;
	}
	struct ipv6hdr *ip6 = data + ETH_HLEN;

	if ((void *)(ip6 + 1) > end)
		return -1;
	if (ip6->hop_limit != 255)
		ip6->hop_limit++;
	return 0;
}

/* stash copies the outer headers (hlen bytes after the Ethernet header)
 * into a fresh slot and applies End to the copy. It returns the slot's tag,
 * or 0 with *reason set. */
static __always_inline __u32 stash(struct __sk_buff *skb, __u32 id, __u64 hlen, __u32 srh_off,
				   __u32 nh_off, __u8 sl, const struct nf_sid *sid, int shift, __u32 *reason)
{
	__u32 zero = 0, idx, tag;
	__u64 *next, n, so, seg;
	struct nf_slot *s;

	next = bpf_map_lookup_elem(&nf_next, &zero);
	if (!next) {
		*reason = NF_DROP_INTERNAL;
		return 0;
	}
	n = __sync_fetch_and_add(next, 1);
	idx = (__u32)n & (NF_SLOTS - 1);
	tag = ((__u32)n & 0x7fff) | NF_TAG_BIT;
	s = bpf_map_lookup_elem(&nf_slots, &idx);
	if (!s) {
		*reason = NF_DROP_INTERNAL;
		return 0;
	}
	/* Verifier: a variable length must be proven in [1, NF_HDR_MAX];
	 * two checks apart, or clang folds them into one subtraction the
	 * verifier cannot follow; 64-bit, or clang checks a zero-extended
	 * copy and passes the original. */
	barrier_var(hlen);
	if (hlen > NF_HDR_MAX) {
		*reason = NF_DROP_HDR_TOO_BIG;
		return 0;
	}
	barrier_var(hlen);
	if (hlen < sizeof(struct ipv6hdr)) {
		*reason = NF_DROP_INTERNAL;
		return 0;
	}
	if (pkt_copy_from(skb, ETH_HLEN, s->hdr, hlen) < 0) {
		*reason = NF_DROP_TRUNCATED;
		return 0;
	}
	if (shift) {
		/* A uSID with more in its container: End with NEXT-C-SID
		 * (RFC 9800 4.1.1) on the copy: the DA shifts, SL stays (there
		 * may be no SRH). */
		csid_shift((struct in6_addr *)&s->hdr[offsetof(struct ipv6hdr, daddr)], sid->csid_lblen,
			   sid->csid_nflen);
		goto done;
	}
	/* End on the copy: SL--, DA <- Segment List[SL], hop limit - 1. */
	sl--;
	so = srh_off;
	barrier_var(so);
	if (so > NF_HDR_MAX - sizeof(struct ipv6_sr_hdr)) {
		*reason = NF_DROP_TRUNCATED;
		return 0;
	}
	s->hdr[so + offsetof(struct ipv6_sr_hdr, segments_left)] = sl;
	seg = srh_off + sizeof(struct ipv6_sr_hdr) + (__u64)sl * 16;
	barrier_var(seg);
	if (seg > NF_HDR_MAX - 16) {
		*reason = NF_DROP_TRUNCATED;
		return 0;
	}
	__builtin_memcpy(&s->hdr[offsetof(struct ipv6hdr, daddr)], &s->hdr[seg], 16);
done:
	s->hdr[offsetof(struct ipv6hdr, hop_limit)]--;
	s->tag = tag;
	s->id = id;
	s->ifindex = skb->ingress_ifindex;
	s->mark = skb->mark;
	s->len = hlen;
	s->srh_off = srh_off;
	s->nh_off = nh_off;
	return tag;
}

#define NF_VLAN_MAX 8		   /* in-band tags nf_in looks through (after the skb's) */
#define NF_VLAN_VID 0x0fff	   /* the VLAN ID bits of a TCI */
#define NF_VLAN_GO 0		   /* nf_vlan: the frame is plain IPv6 now, go on */

static __always_inline int nf_is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/* nf_vlan: a frame with a VLAN tag in the skb's metadata. The receive path
 * moves the outer tag (802.1Q or 802.1ad) there before TCX runs; further
 * tags stay in-band. What the kernel does after TCX (__netif_receive_skb_core):
 *  - VID != 0: a VLAN device of that VID and protocol on this interface
 *    takes the frame, the tag removed, and TCX runs again there (nf_in is
 *    attached to it); without one the frame is for another host
 *    (PACKET_OTHERHOST): IPv4/IPv6 drop it. Not IPv6 here either way.
 *  - VID 0 (a priority tag): removed; a further tag is taken the same way
 *    (VID != 0: as above, without TCX on this interface again), and after
 *    priority tags only, the frame is processed as untagged IPv6 on this
 *    interface — after TCX, which never saw it as IPv6.
 * So nf_in leaves VID != 0 to the kernel, and takes a SID's packet behind
 * priority tags only, as untagged (the tags popped: none travels on with
 * the packet, as none does in the kernel's processing). A frame with more
 * stacked priority tags than NF_VLAN_MAX is dropped and counted on the
 * loop's row: its destination is out of sight, and passing it would let a
 * SID's packet reach the kernel's routing past End.AN.NF. Anything else is
 * left alone (TC_ACT_UNSPEC), unchanged. Only tagged frames pay for this. */
static __always_inline int nf_vlan(struct __sk_buff *skb, __be16 proto)
{
	struct nf_sid_key k = { .prefixlen = 128 };
	struct ipv6hdr ip6;
	struct nf_stats *st;
	__u32 off = ETH_HLEN, loop = NF_LOOP_STATS;
	__be16 tag[2]; /* TCI, then the next protocol */
	int i;

	if (skb->vlan_tci & NF_VLAN_VID)
		return TC_ACT_UNSPEC;
	for (i = 0; i < NF_VLAN_MAX && nf_is_vlan(proto); i++) {
		if (bpf_skb_load_bytes(skb, off, tag, sizeof(tag)) < 0)
			return TC_ACT_UNSPEC; /* truncated: the kernel drops it */
		if (tag[0] & bpf_htons(NF_VLAN_VID))
			return TC_ACT_UNSPEC;
		proto = tag[1];
		off += sizeof(tag);
	}
	if (nf_is_vlan(proto)) {
		st = bpf_map_lookup_elem(&nf_stats_map, &loop);
		return drop(st, NF_DROP_VLAN_STACK);
	}
	if (proto != bpf_htons(ETH_P_IPV6) || bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) < 0 ||
	    ip6.version != 6)
		return TC_ACT_UNSPEC;
	__builtin_memcpy(k.addr, &ip6.daddr, 16);
	if (!bpf_map_lookup_elem(&nf_sids, &k))
		return TC_ACT_UNSPEC; /* not ours: the kernel strips the tags itself */
	/* Each pop clears the skb's tag and moves the next in-band one
	 * there; all are priority tags (checked above). */
	for (i = 0; i <= NF_VLAN_MAX && skb->vlan_present; i++)
		if (bpf_skb_vlan_pop(skb) < 0)
			break;
	if (skb->vlan_present) {
		__u32 id;
		struct nf_sid *sid = bpf_map_lookup_elem(&nf_sids, &k);

		id = sid ? sid->id : NF_LOOP_STATS;
		st = bpf_map_lookup_elem(&nf_stats_map, &id);
		return drop(st, NF_DROP_VLAN_POP);
	}
	return NF_VLAN_GO;
}

SEC("tc")
int nf_in(struct __sk_buff *skb)
{
	struct nf_sid_key k = { .prefixlen = 128 };
	struct ipv6_walk w;
	struct nf_stats *st;
	struct nf_sid *sid;
	struct nf_cfg *cfg;
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	struct cursor c;
	__u32 id, hlen, tag, reason = 0, zero = 0, plen, lim, args = 0;
	__u8 hop, ver;
	__u64 flags;
	int v4, shift = 0;

	cursor_init_skb(&c, skb);
	eth = cursor_eth(&c);
	if (!eth)
		return TC_ACT_UNSPEC;
	/* A tagged frame: what the kernel takes as IPv6 here (nf_vlan). The
	 * Ethernet header says IPv6 for a frame tagged VID 100 too: the tag
	 * is in the skb's metadata, not in the header. */
	if (skb->vlan_present) {
		int r = nf_vlan(skb, eth->h_proto);

		if (r != NF_VLAN_GO)
			return r;
		cursor_init_skb(&c, skb);
		eth = cursor_eth(&c);
		if (!eth)
			return TC_ACT_UNSPEC;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	ip6 = cursor_ipv6(&c);
	if (!ip6 || ip6->version != 6)
		return TC_ACT_UNSPEC;
	__builtin_memcpy(k.addr, &ip6->daddr, 16);
	sid = bpf_map_lookup_elem(&nf_sids, &k);
	if (!sid)
		return TC_ACT_UNSPEC;
	id = sid->id;
	if (id >= NF_MAX_SIDS)
		return TC_ACT_UNSPEC;
	cfg = bpf_map_lookup_elem(&nf_cfg_map, &zero);
	/* The loop's own inner end is an L3 device (no Ethernet header): what
	 * looked like a SID above was inner packet bytes. */
	if (cfg && cfg->in_ifindex && skb->ingress_ifindex == cfg->in_ifindex)
		return TC_ACT_UNSPEC;
	st = bpf_map_lookup_elem(&nf_stats_map, &id);
	if (st) {
		st->packets++;
		st->bytes += skb->len;
	}
	if (sid->csid_nflen) {
		if (!csid_padding_ok(&ip6->daddr, sid->csid_lblen, sid->csid_nflen))
			return drop(st, NF_DROP_CSID_PADDING);
		shift = csid_has_next(&ip6->daddr, sid->csid_lblen, sid->csid_nflen);
	}
	if (sid->args_bits) {
		args = bpf_ntohl(ip6->daddr.in6_u.u6_addr32[3]);
		if (sid->args_bits < 32)
			args &= (1U << sid->args_bits) - 1;
	}
	hop = ip6->hop_limit;
	/* Bytes past the payload length are padding, not the packet. */
	plen = bpf_ntohs(ip6->payload_len);
	lim = ETH_HLEN + sizeof(struct ipv6hdr) + plen;
	if (plen == 0 || lim > skb->len)
		return drop(st, NF_DROP_TRUNCATED);

	ipv6_walk_skb(skb, lim, ETH_HLEN + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	if (w.truncated)
		return drop(st, NF_DROP_TRUNCATED);
	if (w.bad_rh || w.multi_srh)
		return drop(st, NF_DROP_BAD_SRH);
	if (w.too_many)
		return drop(st, NF_DROP_BAD_EXT);
	if (w.fragment)
		return drop(st, NF_DROP_FRAGMENT);
	/* A shifting uSID continues in its own container: no SRH needed. */
	if (!shift && !w.srh_off)
		return drop(st, NF_DROP_NO_SRH);
	if (!shift && w.sl == 0)
		return drop(st, NF_DROP_SL_ZERO);
	if (w.upper != IPPROTO_IPIP && w.upper != IPPROTO_IPV6)
		return drop(st, NF_DROP_INSERT);
	if (hop <= 1)
		return drop(st, NF_DROP_HOP_LIMIT);
	v4 = w.upper == IPPROTO_IPIP;
	if (bpf_skb_load_bytes(skb, w.upper_off, &ver, 1) < 0 ||
	    w.upper_off + (v4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr)) > lim)
		return drop(st, NF_DROP_TRUNCATED);
	if ((ver >> 4) != (v4 ? 4 : 6) || (v4 && (ver & 0xf) < 5))
		return drop(st, NF_DROP_BAD_INNER);
	if (!cfg || !cfg->in_ifindex)
		return drop(st, NF_DROP_NO_LOOP);

	hlen = w.upper_off - ETH_HLEN;
	tag = stash(skb, id, hlen, w.srh_off ? w.srh_off - ETH_HLEN : 0, w.nh_off - ETH_HLEN, w.sl, sid, shift,
		    &reason);
	if (!tag)
		return drop(st, reason);

	/* Trailing padding would become part of the inner packet. */
	if (skb->len > lim && bpf_skb_change_tail(skb, lim, 0) < 0)
		return drop(st, NF_DROP_ADJUST_ROOM);
	/* FIXED_GSO: gso_size is the inner payload per segment, which
	 * removing the outer headers does not change (as the proxies). */
	flags = (v4 ? SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV4 : SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV6) |
		BPF_F_ADJ_ROOM_FIXED_GSO;
	if (bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_MAC, flags) < 0)
		return drop(st, NF_DROP_ADJUST_ROOM);
	eth = pkt_eth(skb);
	if (!eth)
		return drop(st, NF_DROP_INTERNAL);
	eth->h_proto = bpf_htons(v4 ? ETH_P_IP : ETH_P_IPV6);
	__builtin_memcpy(eth->h_dest, cfg->in_mac, ETH_ALEN);
	if (ttl_up(skb, v4) < 0)
		return drop(st, NF_DROP_INTERNAL);
	if (sid->args_bits)
		skb->mark = args;
	skb->tc_index = tag;
	if (st)
		st->to_netfilter++;
	return bpf_redirect(cfg->in_ifindex, BPF_F_INGRESS);
}

/* push_outer re-encapsulates the packet (the inner packet behind an
 * Ethernet header) with s's headers. */
static __always_inline int push_outer(struct __sk_buff *skb, struct nf_slot *s, int v4)
{
	__u64 len = s->len; /* 64-bit: no zero-extended copy for clang to check instead */
	__u32 nh_off = s->nh_off;
	__be16 plen, proto = bpf_htons(ETH_P_IPV6);
	__u8 nh = v4 ? IPPROTO_IPIP : IPPROTO_IPV6;
	long rc;

	/* Two checks apart for the verifier (see stash). */
	barrier_var(len);
	if (len > NF_HDR_MAX)
		return -1;
	barrier_var(len);
	if (len < sizeof(struct ipv6hdr))
		return -1;
	/* As the proxies' outbound half: ENCAP_L3_IPV6 records the tunnel
	 * for GSO; an skb whose encapsulation bit the decapsulation left set
	 * refuses it (-EALREADY) and already carries that state. Then only a
	 * DECAP flag makes skb->protocol IPv6: grow 8 more, strip them. */
	rc = bpf_skb_adjust_room(skb, len, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6);
	if (rc == -EALREADY) {
		if (!v4) {
			rc = bpf_skb_adjust_room(skb, len, BPF_ADJ_ROOM_MAC, 0);
		} else {
			rc = bpf_skb_adjust_room(skb, len + 8, BPF_ADJ_ROOM_MAC, 0);
			if (rc == 0)
				rc = bpf_skb_adjust_room(skb, -8, BPF_ADJ_ROOM_MAC,
							 SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV6);
		}
	}
	if (rc < 0)
		return -2;
	if (pkt_copy_to(skb, ETH_HLEN, s->hdr, len) < 0)
		return -1;
	plen = bpf_htons(skb->len - ETH_HLEN - sizeof(struct ipv6hdr));
	if (nh_off >= len)
		return -1;
	/* The outer headers are in the linear data (adjust_room pushed
	 * them there): plain stores. */
	{
		void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		struct ethhdr *eth = data;
		struct ipv6hdr *ip6 = data + ETH_HLEN;
		__u8 *nhp;

		if ((void *)(ip6 + 1) > end)
			return -1;
		eth->h_proto = proto;
		ip6->payload_len = plen;
		barrier_var(nh_off);
		if (nh_off > NF_HDR_MAX)
			return -1;
		nhp = data + ETH_HLEN + nh_off;
		if ((void *)(nhp + 1) > end)
			return -1;
		*nhp = nh;
	}
	return 0;
}

SEC("tc")
int nf_out(struct __sk_buff *skb)
{
	struct bpf_fib_lookup f = {};
	struct nf_stats *st, *lst;
	struct nf_slot *s;
	struct nf_cfg *cfg;
	struct ipv6hdr ip6;
	__u32 tag = skb->tc_index, idx, id, zero = 0, loop = NF_LOOP_STATS;
	int v4, rc;

	lst = bpf_map_lookup_elem(&nf_stats_map, &loop);
	if (!(tag & NF_TAG_BIT))
		return drop(lst, NF_DROP_NO_TAG);
	idx = tag & (NF_SLOTS - 1);
	s = bpf_map_lookup_elem(&nf_slots, &idx);
	if (!s)
		return drop(lst, NF_DROP_INTERNAL);
	if (s->tag != tag)
		return drop(lst, NF_DROP_STALE);
	id = s->id;
	st = bpf_map_lookup_elem(&nf_stats_map, &id);
	if (st)
		st->returned++;
	cfg = bpf_map_lookup_elem(&nf_cfg_map, &zero);
	if (!cfg)
		return drop(st, NF_DROP_INTERNAL);
	if (skb->protocol == bpf_htons(ETH_P_IP))
		v4 = 1;
	else if (skb->protocol == bpf_htons(ETH_P_IPV6))
		v4 = 0;
	else
		return drop(st, NF_DROP_FAMILY);
	rc = push_outer(skb, s, v4);
	if (rc == -2)
		return drop(st, NF_DROP_ADJUST_ROOM);
	if (rc < 0)
		return drop(st, NF_DROP_INTERNAL);
	skb->mark = s->mark;
	skb->tc_index = 0;
	if (st)
		st->accepted++;

	/* The slot holds the outer IPv6 header as sent. */
	__builtin_memcpy(&ip6, s->hdr, sizeof(ip6));

	/* The next-hop cache (issue #32): the lookup below walks the node's
	 * policy rules and two tables (local, then the rule's) per packet, as
	 * much as native End spends on its whole route lookup. An answer is
	 * reused while the namespace's routing generation is unchanged and
	 * for at most nf_fib_cache_ns (neighbour changes do not move the
	 * generation); the egress MTU is checked per packet (nor do MTU
	 * changes); anything else takes the full lookup. */
	struct sk_buff___nf *kskb = bpf_cast_to_kern_ctx(skb);
	/* Plain loads through the trusted kernel pointer: the verifier makes
	 * them fault-safe loads in place (BPF_CORE_READ's helper calls cost
	 * a third of what the cache saves). */
	struct net___nf *net = kskb->dev->nd_net.net;
	__u32 gen = net->ipv6.fib6_sernum.counter;
	__u32 routes = net->ipv6.rt6_stats->fib_rt_entries;
	__u64 now = bpf_ktime_get_coarse_ns();
	__u32 ci = (ip6.daddr.in6_u.u6_addr32[3] ^ ip6.daddr.in6_u.u6_addr32[2] ^ ip6.saddr.in6_u.u6_addr32[3] ^
		    s->ifindex);
	struct nf_fib_ent *ce;

	ci = (ci ^ (ci >> 16) ^ (ci >> 8)) & (NF_FIB_CACHE - 1);
	ce = bpf_map_lookup_elem(&nf_fib_cache, &ci);
	if (nf_fib_cache_on && ce && ce->valid && ce->gen == gen && ce->routes == routes &&
	    now < ce->expires && ce->iif == s->ifindex &&
	    addr_eq(ce->dst, &ip6.daddr) && addr_eq(ce->src, &ip6.saddr)) {
		__u32 mtu = 0;

		/* IPv6 needs an MTU of 1280 on every link it runs on: a
		 * packet that size or smaller (not GSO) fits without asking. */
		if ((!skb->gso_size && skb->len <= ETH_HLEN + 1280) ||
		    bpf_check_mtu(skb, ce->oif, &mtu, 0, 0) == BPF_MTU_CHK_RET_SUCCESS) {
			struct ethhdr *eth = pkt_eth(skb);

			if (!eth)
				return drop(st, NF_DROP_INTERNAL);
			__builtin_memcpy(eth->h_dest, ce->dmac, ETH_ALEN);
			__builtin_memcpy(eth->h_source, ce->smac, ETH_ALEN);
			return bpf_redirect(ce->oif, 0);
		}
	}

	f.family = AF_INET6;
	f.ifindex = s->ifindex;
	/* tot_len 0: the helper checks the skb itself against the egress
	 * MTU, GSO-aware (is_skb_forwardable); a length would refuse every
	 * GSO packet as too big and send it the slow way. */
	f.tot_len = 0;
	__builtin_memcpy(f.ipv6_src, &ip6.saddr, 16);
	__builtin_memcpy(f.ipv6_dst, &ip6.daddr, 16);
	rc = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		struct ethhdr *eth = pkt_eth(skb);

		if (nf_fib_cache_on && ce) {
			ce->gen = gen;
			ce->routes = routes;
			ce->expires = now + nf_fib_cache_ns;
			ce->iif = s->ifindex;
			__builtin_memcpy(ce->src, &ip6.saddr, 16);
			__builtin_memcpy(ce->dst, &ip6.daddr, 16);
			ce->oif = f.ifindex;
			__builtin_memcpy(ce->dmac, f.dmac, ETH_ALEN);
			__builtin_memcpy(ce->smac, f.smac, ETH_ALEN);
			ce->valid = 1;
		}

		if (!eth)
			return drop(st, NF_DROP_INTERNAL);
		__builtin_memcpy(eth->h_dest, f.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, f.smac, ETH_ALEN);
		return bpf_redirect(f.ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(f.ifindex, 0, 0, 0);
	/* The FIB cannot forward it (the next SID is local, an lwt route,
	 * unreachable ...): the stack decides, from the ingress of the loop's
	 * outer end, where the node's tc programs run first (the next SID may
	 * be another eBPF service of this node). */
	if (st)
		st->to_stack++;
	{
		struct ethhdr *eth = pkt_eth(skb);

		if (!eth)
			return drop(st, NF_DROP_INTERNAL);
		__builtin_memcpy(eth->h_dest, cfg->out_mac, ETH_ALEN);
	}
	return bpf_redirect(cfg->out_ifindex, BPF_F_INGRESS);
}

char _license[] SEC("license") = "Dual BSD/GPL";

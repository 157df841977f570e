// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain SR proxies for SR-unaware service functions (End.AS, End.AD,
 * End.EAD, per-flow End.AD, End.AM) as one tc ingress program.
 *
 * The same program is attached to every interface of the NFV node:
 *  - on an interface listed in proxy_ifaces (an IFACE-IN, facing the SF) it
 *    runs the outbound half: push the cached/configured SRv6 headers
 *    (AS/AD/EAD) or de-masquerade (AM), then forward by FIB lookup;
 *  - elsewhere it runs the inbound half for packets whose IPv6 DA is in
 *    proxy_sids: strip the outer headers (AS/AD/EAD, caching them for AD) or
 *    masquerade (AM), then redirect on IFACE-OUT towards the SF.
 * Everything else is left untouched with TC_ACT_UNSPEC (TCX_NEXT): the next
 * program of the TCX chain (e.g. the SR-aware firewall) runs, and at the end
 * of the chain the packet goes to the stack. Packets the proxy rewrote and
 * hands to the stack itself return TC_ACT_OK (they are its own output). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/errno.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/cursor.h"
#include "lib/ipv6_walk.h"
#include "lib/drop.h"
#include "lib/icmp6.h"
#include "lib/icmp4.h"
#include "lib/pktcopy.h"
#include "lib/csid.h"

#define PROXY_MAX_SIDS 256
#define PROXY_HDR_MAX 512 /* outer IPv6 + extension headers a cache can hold */
#define PROXY_FLOWS_MAX 65536

enum proxy_behavior {
	PROXY_AS = 1,
	PROXY_AD = 2,
	PROXY_EAD = 3,
	PROXY_AM = 4,
};

enum proxy_inner {
	PROXY_INNER_ANY = 0, /* End.AM: the payload is not looked at */
	PROXY_INNER_IPV6 = 1,
	PROXY_INNER_IPV4 = 2,
	PROXY_INNER_ETH = 3,
};

enum proxy_flag {
	PROXY_F_FLOW = 1, /* End.AD per-flow cache keyed by the inner 5-tuple */
	PROXY_F_MAC = 2,  /* S-ADDR is a MAC: rewrite L2, no neighbour lookup */
	PROXY_F_PEER = 4, /* with PROXY_F_MAC: IFACE-OUT is a veth whose peer (the SF's
			   * end) is in another namespace: bpf_redirect_peer */
};

enum proxy_drop_reason {
	PROXY_DROP_TRUNCATED, /* "truncated" */
	PROXY_DROP_BAD_SRH, /* "bad-srh" */
	PROXY_DROP_BAD_EXT, /* "bad-ext-headers" */
	PROXY_DROP_NO_SRH, /* "no-srh" */
	PROXY_DROP_SL_ZERO, /* "sl-zero" */
	PROXY_DROP_INNER_TYPE, /* "inner-type" */
	PROXY_DROP_FRAGMENT, /* "fragment" */
	PROXY_DROP_HOP_LIMIT, /* "hop-limit" */
	PROXY_DROP_HDR_TOO_LONG, /* "header-too-long" */
	PROXY_DROP_ADJUST_ROOM, /* "adjust-room" */
	PROXY_DROP_CACHE_EMPTY, /* "cache-empty" */
	PROXY_DROP_FLOW_MISS, /* "flow-miss" */
	PROXY_DROP_FLOW_EXPIRED, /* "flow-expired" */
	PROXY_DROP_FLOW_FULL, /* "flow-full" */
	PROXY_DROP_MTU, /* "mtu" */
	PROXY_DROP_TOO_BIG, /* "too-big" */
	PROXY_DROP_INTERNAL, /* "internal" */
	PROXY_DROP_GSO_L2,  /* "gso-ethernet": a GSO frame for an Ethernet payload */
	PROXY_DROP_NO_FIB,  /* "no-fib": an Ethernet payload the FIB cannot forward */
	PROXY_DROP_VLAN,    /* "vlan": an 802.1Q/802.1ad-tagged frame from the SF (IP modes): the stack would untag and route it past the proxy */
	PROXY_DROP_CSID_PADDING, /* "csid-padding": a uSID container with a non-zero C-SID after its end-of-container zero */
	PROXY_DROP_CSID_AM, /* "csid-masquerade": End.AM's uSID with more uSIDs after it (End.AM must end its container) */
	PROXY_DROP_MAX,
};

/* Configuration of one proxy SID: value of proxy_sids (key: the SID) and of
 * proxy_ifaces (key: the IFACE-IN ifindex). */
struct proxy_sid {
	__u32 id; /* index in proxy_stats and key of proxy_cache */
	__u8 behavior;
	__u8 inner;
	__u8 flags;
	__u8 _pad0;
	__u32 oif;
	__u32 iif;
	__u8 dmac[6]; /* with PROXY_F_MAC: the SF's MAC ... */
	__u8 smac[6]; /* ... and IFACE-OUT's own MAC */
	__u32 nh_family; /* AF_INET / AF_INET6 S-ADDR for bpf_redirect_neigh */
	__u32 nh[4];
	__u64 flow_timeout_ns; /* per-flow cache aging, 0 = never */
	__u32 flow_max;	       /* per-flow cache of its own (flow_caps_map) of this size; 0: node-wide LRU */
	/* A uSID (RFC 9800 NEXT-C-SID, lib/csid.h): the SID is stored as
	 * block:uSID:: and matches whatever uSIDs follow it in the DA; End
	 * shifts the container. 0/0: a full SID. */
	__u8 csid_lblen;
	__u8 csid_nflen;
	__u16 _pad1;
};

/* Cached outer headers (outer IPv6 + all its extension headers, as they
 * must leave the node), per SID or per inner flow. */
struct proxy_cache {
	__u64 updated_ns;
	__u32 len;	 /* bytes used in hdr */
	__u16 nh_off;	 /* offset in hdr of the Next Header naming the inner packet */
	__u8 valid;
	__u8 terminal;	 /* End.EAD with SL = 0: nothing to re-encapsulate */
	__u8 hdr[PROXY_HDR_MAX];
};

struct proxy_flow_key {
	__u32 id;
	__u8 proto;
	__u8 family;
	__be16 sport;
	__be16 dport;
	__u16 _pad0;
	__u8 saddr[16];
	__u8 daddr[16];
};

struct proxy_stats {
	__u64 in_packets; /* inbound: sent to the SF */
	__u64 in_bytes;
	__u64 out_packets; /* outbound: re-encapsulated / de-masqueraded */
	__u64 out_bytes;
	__u64 passed; /* outbound: left alone (link-local, non-IP, no SRH, EAD terminal) */
	__u64 cache_updates;
	__u64 icmp_errors; /* Packet Too Big sent instead of an oversize encapsulation */
	__u64 drops[PROXY_DROP_MAX];
	__u64 out_drops; /* of drops[], those on the way back (from the SF) */
};

/* Referenced so their BTF is emitted for bpf2go -type (never written). */
const enum proxy_behavior *unused_behavior __attribute__((unused));
const enum proxy_inner *unused_inner __attribute__((unused));
const enum proxy_drop_reason *unused_drop_reason __attribute__((unused));

/* How often a per-flow entry's timestamp is refreshed by inbound traffic
 * (a write per packet would bounce the cache line between CPUs). */
const volatile __u64 refresh_ns = 1000000000ULL;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, struct in6_addr);
	__type(value, struct proxy_sid);
} sids_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, struct proxy_sid);
} ifaces_map SEC(".maps");

/* HASH, not ARRAY: bpf_map_update_elem replaces the element under RCU, so
 * the outbound half never reads a half-written header. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, struct proxy_cache);
} cache_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROXY_FLOWS_MAX);
	__type(key, struct proxy_flow_key);
	__type(value, struct proxy_cache);
} flows_map SEC(".maps");

/* Per-flow caches of SIDs with `flow max N`: a hash of N entries per SID
 * (created by the loader with max_entries N; the template's 1 is never
 * used). A hash, not an LRU: a full cache refuses new flows (counted as
 * flow-full) after freeing the expired ones, instead of silently evicting
 * live flows, so one SID's flows never push out another's. */
struct flows_inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct proxy_flow_key);
	__type(value, struct proxy_cache);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__array(values, struct flows_inner);
} flow_caps_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, struct proxy_stats);
} stats_map SEC(".maps");

/* csid_map[0]: how many leading bytes of a DA key a uSID SID
 * ((lblen + nflen) / 8; 0: the node has none), written by the control
 * plane when it installs one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} csid_map SEC(".maps");

/* Scratch space for building a cache entry (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct proxy_cache);
} scratch_map SEC(".maps");

static __always_inline int drop(struct proxy_stats *st, __u32 reason)
{
	count_drop(st, reason, PROXY_DROP_MAX);
	return TC_ACT_SHOT;
}

/* Not the proxy's packet (or one it leaves alone): let the next TCX
 * program see it; TCX_NEXT after the last program means pass. */
#define PROXY_NEXT TC_ACT_UNSPEC

static __always_inline int pass(struct proxy_stats *st)
{
	if (st)
		st->passed++;
	return PROXY_NEXT;
}

static __always_inline int walk_error(const struct ipv6_walk *w)
{
	if (w->truncated)
		return PROXY_DROP_TRUNCATED;
	if (w->bad_rh || w->multi_srh)
		return PROXY_DROP_BAD_SRH;
	if (w->fragment)
		return PROXY_DROP_FRAGMENT;
	if (w->too_many)
		return PROXY_DROP_BAD_EXT;
	return -1;
}

/* flow_key fills k from the IPv4/IPv6 header at off (inner packet). */
static __always_inline int flow_key(struct __sk_buff *skb, __u32 off, __u8 inner, __u32 id,
				    struct proxy_flow_key *k)
{
	__u32 l4off;
	__be16 ports[2];

	__builtin_memset(k, 0, sizeof(*k));
	k->id = id;
	if (inner == PROXY_INNER_IPV6) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) < 0)
			return -1;
		k->family = AF_INET6;
		k->proto = ip6.nexthdr;
		__builtin_memcpy(k->saddr, &ip6.saddr, 16);
		__builtin_memcpy(k->daddr, &ip6.daddr, 16);
		l4off = off + sizeof(ip6);
	} else if (inner == PROXY_INNER_IPV4) {
		struct iphdr ip4;

		if (bpf_skb_load_bytes(skb, off, &ip4, sizeof(ip4)) < 0)
			return -1;
		k->family = AF_INET;
		k->proto = ip4.protocol;
		__builtin_memcpy(k->saddr, &ip4.saddr, 4);
		__builtin_memcpy(k->daddr, &ip4.daddr, 4);
		/* Non-first fragments carry no ports. */
		if (ip4.frag_off & bpf_htons(0x1fff))
			return 0;
		l4off = off + (__u32)ip4.ihl * 4;
	} else {
		return -1;
	}
	if (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP || k->proto == IPPROTO_SCTP) {
		if (bpf_skb_load_bytes(skb, l4off, ports, sizeof(ports)) == 0) {
			k->sport = ports[0];
			k->dport = ports[1];
		}
	}
	return 0;
}

static __always_inline int same_cache(const struct proxy_cache *a, const struct proxy_cache *b)
{
	int i;

	if (a->len != b->len || a->nh_off != b->nh_off || a->terminal != b->terminal ||
	    !a->valid)
		return 0;
	for (i = 0; i < PROXY_HDR_MAX / 8; i++) {
		if (i * 8 >= a->len)
			break;
		if (((const __u64 *)a->hdr)[i] != ((const __u64 *)b->hdr)[i])
			return 0;
	}
	return 1;
}

/* flows_of is the per-flow cache of cfg: its own (flow max) or the
 * node-wide LRU; NULL if the loader did not create it. */
static __always_inline void *flows_of(const struct proxy_sid *cfg)
{
	__u32 id = cfg->id;

	if (cfg->flow_max)
		return bpf_map_lookup_elem(&flow_caps_map, &id);
	return &flows_map;
}

struct flow_gc {
	__u64 now;
	__u64 timeout;
};

/* flow_gc_cb deletes an expired entry of a capped per-flow cache. */
static long flow_gc_cb(void *map, struct proxy_flow_key *key, struct proxy_cache *v,
		       struct flow_gc *g)
{
	if (g->now - v->updated_ns > g->timeout)
		bpf_map_delete_elem(map, key);
	return 0;
}

/* flow_insert_full adds a new flow to a capped cache that is full (-E2BIG):
 * frees the expired entries (one walk of at most flow max entries, only
 * when full) and tries again. */
static __always_inline long flow_insert_full(const struct proxy_sid *cfg,
					     struct proxy_flow_key *fk, struct proxy_cache *s)
{
	struct flow_gc g = { .now = s->updated_ns, .timeout = cfg->flow_timeout_ns };
	__u32 id = cfg->id;
	/* Looked up again here so this helper call only ever sees the inner
	 * maps (the verifier wants one map type per bpf_for_each_map_elem). */
	void *m = bpf_map_lookup_elem(&flow_caps_map, &id);

	if (!m || !g.timeout)
		return -E2BIG;
	bpf_for_each_map_elem(m, flow_gc_cb, &g, 0);
	return bpf_map_update_elem(m, fk, s, BPF_ANY);
}

/* cache_store compares s with the current entry and replaces it when it
 * differs (the research's "update the cache if different"). */
static __always_inline int cache_store(struct proxy_sid *cfg, struct proxy_stats *st,
				       struct proxy_cache *s, struct proxy_flow_key *fk)
{
	struct proxy_cache *old;
	__u64 now = s->updated_ns;
	__u32 id = cfg->id;
	void *map = &cache_map;
	void *key = &id;
	long err;

	if (fk) {
		map = flows_of(cfg);
		if (!map)
			return PROXY_DROP_INTERNAL;
		key = fk;
	}
	old = bpf_map_lookup_elem(map, key);
	if (old && same_cache(old, s)) {
		if (fk && now - old->updated_ns > refresh_ns)
			old->updated_ns = now;
		return -1;
	}
	err = bpf_map_update_elem(map, key, s, BPF_ANY);
	if (err == -E2BIG && fk && cfg->flow_max)
		err = flow_insert_full(cfg, fk, s);
	if (err < 0)
		return fk ? PROXY_DROP_FLOW_FULL : PROXY_DROP_INTERNAL;
	if (st)
		st->cache_updates++;
	return -1;
}

/* to_sf sends the (decapsulated or masqueraded) packet on IFACE-OUT. */
static __always_inline int to_sf(struct __sk_buff *skb, struct proxy_sid *cfg,
				 struct proxy_stats *st, __u32 len)
{
	if (st) {
		st->in_packets++;
		st->in_bytes += len;
	}
	if (cfg->inner == PROXY_INNER_ETH)
		return bpf_redirect(cfg->oif, 0);
	if (cfg->flags & PROXY_F_MAC) {
		struct ethhdr *eth = pkt_eth(skb);

		if (!eth)
			return drop(st, PROXY_DROP_INTERNAL);
		/* dmac and smac are adjacent, like in struct ethhdr. */
		__builtin_memcpy(eth->h_dest, cfg->dmac, 2 * ETH_ALEN);
		if (cfg->flags & PROXY_F_PEER) {
			/* Straight into the ingress of the SF's end of the
			 * veth, in this softirq: no transmit on IFACE-OUT, no
			 * backlog queue. The veth would clear the mark when
			 * crossing namespaces (skb_scrub_packet xnet); the
			 * peer redirect keeps it, so clear it here: the SF
			 * sees what it saw through the veth. */
			skb->mark = 0;
			return bpf_redirect_peer(cfg->oif, 0);
		}
		return bpf_redirect(cfg->oif, 0);
	}
	struct bpf_redir_neigh nh = { .nh_family = cfg->nh_family };

	__builtin_memcpy(nh.ipv6_nh, cfg->nh, sizeof(nh.ipv6_nh));
	return bpf_redirect_neigh(cfg->oif, &nh, sizeof(nh), 0);
}

static __always_inline int inbound_am(struct __sk_buff *skb, struct proxy_sid *cfg,
				      struct proxy_stats *st, const struct ipv6_walk *w)
{
	struct in6_addr last;

	if (!w->srh_off)
		return drop(st, PROXY_DROP_NO_SRH);
	if (w->sl == 0)
		return drop(st, PROXY_DROP_SL_ZERO);
	/* DA <- Segment List[0], the final destination. */
	if (bpf_skb_load_bytes(skb, w->srh_off + IPV6_SRH_FIXED_LEN, &last, sizeof(last)) < 0)
		return drop(st, PROXY_DROP_TRUNCATED);
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, daddr), &last,
				sizeof(last), BPF_F_RECOMPUTE_CSUM) < 0)
		return drop(st, PROXY_DROP_INTERNAL);
	return to_sf(skb, cfg, st, skb->len);
}

/* decap_inner classifies the payload of an inbound packet (the walk's
 * upper layer): the proxy's inner type and the adjust_room flags that
 * strip the outer headers in front of it. -1, or a drop reason. */
static __always_inline int decap_inner(__u8 upper, __u8 *inner, __u64 *flags)
{
	switch (upper) {
	case IPPROTO_IPV6:
		*inner = PROXY_INNER_IPV6;
		*flags = SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV6;
		return -1;
	case IPPROTO_IPIP:
		*inner = PROXY_INNER_IPV4;
		*flags = SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV4;
		return -1;
	case IPPROTO_ETHERNET:
		*inner = PROXY_INNER_ETH;
		/* Only lowers adjust_room's minimum remaining length (20):
		 * the inner frame may be short (ARP). skb->protocol is
		 * re-derived by the receiver of the redirected frame. */
		*flags = SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV4;
		return -1;
	}
	return PROXY_DROP_INNER_TYPE;
}

/* cache_learn is End.AD / End.EAD's policy step: the outer headers (hdr_len
 * bytes after Ethernet) with End applied (SL--, DA <- Segment List[SL],
 * hop limit--) become the SID's cache, or its flow's. -1, or a drop
 * reason. */
static __always_inline int cache_learn(struct __sk_buff *skb, struct proxy_sid *cfg,
				       struct proxy_stats *st, const struct ipv6_walk *w,
				       __u8 hop, __u8 inner, __u32 hdr_len, int shift)
{
	struct proxy_flow_key fk, *fkp = 0;
	__u32 zero = 0;
	struct proxy_cache *s = bpf_map_lookup_elem(&scratch_map, &zero);

	if (!s)
		return PROXY_DROP_INTERNAL;
	if (cfg->flags & PROXY_F_FLOW) {
		if (flow_key(skb, w->upper_off, inner, cfg->id, &fk) < 0)
			return PROXY_DROP_TRUNCATED;
		fkp = &fk;
	}
	s->updated_ns = bpf_ktime_get_ns();
	s->valid = 1;
	if (shift) {
		/* A uSID with more in its container: End with NEXT-C-SID on
		 * the copy (RFC 9800 4.1.1): the DA shifts, SL stays (there
		 * may be no SRH at all). */
		__u64 n = hdr_len;

		if (hop <= 1)
			return PROXY_DROP_HOP_LIMIT;
		barrier_var(n);
		if (n < sizeof(struct ipv6hdr) || n > PROXY_HDR_MAX)
			return PROXY_DROP_HDR_TOO_LONG;
		if (pkt_copy_from(skb, ETH_HLEN, s->hdr, n) < 0)
			return PROXY_DROP_TRUNCATED;
		csid_shift((struct in6_addr *)&s->hdr[offsetof(struct ipv6hdr, daddr)], cfg->csid_lblen,
			   cfg->csid_nflen);
		s->hdr[offsetof(struct ipv6hdr, hop_limit)] = hop - 1;
		s->hdr[offsetof(struct ipv6hdr, payload_len)] = 0;
		s->hdr[offsetof(struct ipv6hdr, payload_len) + 1] = 0;
		s->len = hdr_len;
		s->nh_off = w->nh_off - ETH_HLEN;
		s->terminal = 0;
	} else if (!w->srh_off || w->sl == 0) {
		/* Last segment: End.AD forbids it, End.EAD delivers. */
		if (cfg->behavior != PROXY_EAD)
			return PROXY_DROP_SL_ZERO;
		s->len = 0;
		s->nh_off = 0;
		s->terminal = 1;
	} else {
		__u32 srh_rel = w->srh_off - ETH_HLEN;
		__u8 sl = w->sl - 1;

		if (hop <= 1)
			return PROXY_DROP_HOP_LIMIT;
		/* Verifier: hdr_len must be provably in (0, PROXY_HDR_MAX]. */
		__u64 n = hdr_len;

		barrier_var(n);
		if (n < sizeof(struct ipv6hdr) || n > PROXY_HDR_MAX)
			return PROXY_DROP_HDR_TOO_LONG;
		if (pkt_copy_from(skb, ETH_HLEN, s->hdr, n) < 0)
			return PROXY_DROP_TRUNCATED;
		/* Apply End to the copy: SL--, DA <- SL, hop limit--. The
		 * segment is in the copy (the walk checked the SRH lies
		 * within the headers). */
		{
			__u64 seg = srh_rel + IPV6_SRH_FIXED_LEN + (__u64)sl * 16;

			barrier_var(seg);
			if (seg + 16 > n || seg > PROXY_HDR_MAX - 16)
				return PROXY_DROP_TRUNCATED;
			__builtin_memcpy(&s->hdr[offsetof(struct ipv6hdr, daddr)], &s->hdr[seg], 16);
		}
		s->hdr[offsetof(struct ipv6hdr, hop_limit)] = hop - 1;
		/* The payload length is set per packet on the way out;
		 * cached as 0 so that packets of different sizes do not
		 * rewrite the cache (one map update per packet). */
		s->hdr[offsetof(struct ipv6hdr, payload_len)] = 0;
		s->hdr[offsetof(struct ipv6hdr, payload_len) + 1] = 0;
		s->hdr[(srh_rel + offsetof(struct ipv6_sr_hdr, segments_left)) &
		       (PROXY_HDR_MAX - 1)] = sl;
		s->len = hdr_len;
		s->nh_off = w->nh_off - ETH_HLEN;
		s->terminal = 0;
	}
	return cache_store(cfg, st, s, fkp);
}

/* inbound_decap (End.AS, End.AD, End.EAD): classify the payload, learn the
 * cache (AD/EAD), then strip the outer headers and send the payload to
 * the SF. */
static __always_inline int inbound_decap(struct __sk_buff *skb, struct proxy_sid *cfg,
					 struct proxy_stats *st, const struct ipv6_walk *w,
					 __u8 hop, int shift)
{
	__u8 inner = 0;
	__u32 hdr_len, strip;
	__u64 flags = 0;
	struct ethhdr ieth;
	int r;

	r = decap_inner(w->upper, &inner, &flags);
	if (r >= 0 || inner != cfg->inner)
		return drop(st, PROXY_DROP_INNER_TYPE);

	hdr_len = w->upper_off - ETH_HLEN;
	if (hdr_len > PROXY_HDR_MAX)
		return drop(st, PROXY_DROP_HDR_TOO_LONG);
	if (w->upper_off >= skb->len)
		return drop(st, PROXY_DROP_TRUNCATED);

	if (cfg->behavior == PROXY_AD || cfg->behavior == PROXY_EAD) {
		r = cache_learn(skb, cfg, st, w, hop, inner, hdr_len, shift);
		if (r >= 0)
			return drop(st, r);
	}

	strip = hdr_len;
	if (inner == PROXY_INNER_ETH) {
		if (bpf_skb_load_bytes(skb, w->upper_off, &ieth, sizeof(ieth)) < 0)
			return drop(st, PROXY_DROP_TRUNCATED);
		strip += ETH_HLEN;
	}
	/* FIXED_GSO: gso_size is the inner TCP payload per segment, which
	 * removing outer headers does not change (without it the kernel adds
	 * the stripped length to the MSS and the SF's segments outgrow its
	 * link). Note that no flag of this kernel clears skb->encapsulation or
	 * SKB_GSO_IPXIP6 here (iptunnel_pull_offloads does, for native
	 * decapsulation): the outbound half copes with that state. */
	if (bpf_skb_adjust_room(skb, -(__s32)strip, BPF_ADJ_ROOM_MAC,
				flags | BPF_F_ADJ_ROOM_FIXED_GSO) < 0)
		return drop(st, PROXY_DROP_ADJUST_ROOM);
	if (inner == PROXY_INNER_ETH) {
		if (bpf_skb_store_bytes(skb, 0, &ieth, sizeof(ieth), 0) < 0)
			return drop(st, PROXY_DROP_INTERNAL);
	} else if (inner == PROXY_INNER_IPV4) {
		struct ethhdr *eth = pkt_eth(skb);

		if (!eth)
			return drop(st, PROXY_DROP_INTERNAL);
		eth->h_proto = bpf_htons(ETH_P_IP);
	}
	return to_sf(skb, cfg, st, skb->len);
}

/* proxy_sid_key writes into k the key of the SID da activates and
 * reports whether there is one: da itself when it is a SID of this node,
 * else da masked to the node's uSID key length when that names a uSID SID
 * (a full SID must match exactly). A global function, so the verifier
 * checks it once on its own: with two lookups in proxy_inbound it walked
 * the rest of the program once for each (the program's load went from
 * 0.4 to 2.6 s, paid by every apply that opens it). */
__attribute__((noinline)) int proxy_sid_key(struct in6_addr *k, const struct in6_addr *da)
{
	__u32 zero = 0, *bytes;
	struct proxy_sid *cfg;

	if (!k || !da)
		return 0;
	*k = *da;
	if (bpf_map_lookup_elem(&sids_map, k))
		return 1;
	bytes = bpf_map_lookup_elem(&csid_map, &zero);
	if (!bytes || !*bytes)
		return 0;
	csid_key(k, da, *bytes);
	cfg = bpf_map_lookup_elem(&sids_map, k);
	if (!cfg || !cfg->csid_nflen || (__u32)(cfg->csid_lblen + cfg->csid_nflen) / 8 != *bytes)
		return 0;
	return 1;
}

static __always_inline int proxy_inbound(struct __sk_buff *skb)
{
	struct cursor c;
	struct ipv6hdr *ip6;
	struct proxy_sid *cfg;
	struct proxy_stats *st;
	struct ipv6_walk w;
	struct in6_addr da, key;
	__u8 hop, nexthdr;
	int r, shift = 0;

	ip6 = cursor_skb_ipv6(&c, skb);
	if (!ip6)
		return PROXY_NEXT;
	da = ip6->daddr;
	if (!proxy_sid_key(&key, &da))
		return PROXY_NEXT;
	cfg = bpf_map_lookup_elem(&sids_map, &key);
	if (!cfg)
		return PROXY_NEXT;
	hop = ip6->hop_limit;
	nexthdr = ip6->nexthdr;
	st = bpf_map_lookup_elem(&stats_map, &cfg->id);
	if (cfg->csid_nflen) {
		if (!csid_padding_ok(&ip6->daddr, cfg->csid_lblen, cfg->csid_nflen))
			return drop(st, PROXY_DROP_CSID_PADDING);
		shift = csid_has_next(&ip6->daddr, cfg->csid_lblen, cfg->csid_nflen);
	}

	ipv6_walk_ext(skb, ETH_HLEN + sizeof(struct ipv6hdr), nexthdr, &w);
	r = walk_error(&w);
	if (r >= 0)
		return drop(st, r);
	if (cfg->behavior == PROXY_AM) {
		/* The de-masquerade reads the next segment from the SRH; a
		 * shifted container is in no SRH entry. */
		if (shift)
			return drop(st, PROXY_DROP_CSID_AM);
		return inbound_am(skb, cfg, st, &w);
	}
	return inbound_decap(skb, cfg, st, &w, hop, shift);
}

/* forward finishes an outbound packet whose outer IPv6 header is
 * final: L2 from the FIB result and redirect, or the stack when the FIB
 * cannot tell (local SID, lwt route, ...). */
static __always_inline int forward(struct __sk_buff *skb, struct proxy_stats *st,
				   struct bpf_fib_lookup *f, int rc)
{
	if (st) {
		st->out_packets++;
		st->out_bytes += skb->len;
	}
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		struct ethhdr *eth = pkt_eth(skb);

		if (!eth)
			return drop(st, PROXY_DROP_INTERNAL);
		__builtin_memcpy(eth->h_dest, f->dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, f->smac, ETH_ALEN);
		return bpf_redirect(f->ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(f->ifindex, 0, 0, 0);
	return TC_ACT_OK; /* rewritten by us: straight to the stack */
}

static __always_inline int outbound_am(struct __sk_buff *skb, struct proxy_stats *st)
{
	struct cursor c;
	struct ipv6hdr *ip6;
	struct ipv6_walk w;
	struct bpf_fib_lookup f = {};
	struct in6_addr da;
	__u8 hop, sl;
	int rc, r;

	ip6 = cursor_skb_ipv6(&c, skb);
	if (!ip6)
		return pass(st);
	hop = ip6->hop_limit;
	__builtin_memcpy(f.ipv6_src, &ip6->saddr, 16);
	ipv6_walk_ext(skb, ETH_HLEN + sizeof(struct ipv6hdr), ip6->nexthdr, &w);
	r = walk_error(&w);
	if (r >= 0)
		return drop(st, r);
	if (!w.srh_off || w.sl == 0)
		return pass(st); /* not SR traffic: nothing to de-masquerade */
	sl = w.sl - 1;
	if (bpf_skb_load_bytes(skb, w.srh_off + IPV6_SRH_FIXED_LEN + (__u32)sl * 16, &da,
			       sizeof(da)) < 0)
		return drop(st, PROXY_DROP_TRUNCATED);

	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = skb->len - ETH_HLEN;
	__builtin_memcpy(f.ipv6_dst, &da, 16);
	rc = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	/* Too big (always the case for a GSO packet, checked by its total
	 * length): the stack forwards it after the rewrite below, checking
	 * the segments and answering Packet Too Big itself. */
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		rc = -1;
	else if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		/* We forward: the hop limit is ours to decrement. */
		if (hop <= 1)
			return drop(st, PROXY_DROP_HOP_LIMIT);
		hop--;
	}
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, daddr), &da, sizeof(da),
				BPF_F_RECOMPUTE_CSUM) < 0 ||
	    bpf_skb_store_bytes(skb, w.srh_off + offsetof(struct ipv6_sr_hdr, segments_left), &sl,
				1, BPF_F_RECOMPUTE_CSUM) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, hop_limit), &hop, 1,
				BPF_F_RECOMPUTE_CSUM) < 0)
		return drop(st, PROXY_DROP_INTERNAL);
	return forward(skb, st, &f, rc);
}

/* write_outer is the last step of both push paths, once room is made
 * after the Ethernet header: EtherType IPv6, the cached outer headers (len
 * bytes), this packet's payload length (tot: outer IPv6 packet size) and
 * the SRH's next header (at nh_off from the IPv6 header). */
static __always_inline int write_outer(struct __sk_buff *skb, const struct proxy_cache *ce,
				       __u64 len, __u32 tot, __u32 nh_off, __u8 inner_nh)
{
	void *data, *end;
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	__u8 *nhp;

	if (pkt_copy_to(skb, ETH_HLEN, ce->hdr, len) < 0)
		return -1;
	/* The pushed headers are in the linear data: plain stores. */
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end)
		return -1;
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	ip6->payload_len = bpf_htons(tot - sizeof(struct ipv6hdr));
	barrier_var(nh_off);
	if (nh_off > PROXY_HDR_MAX)
		return -1;
	nhp = data + ETH_HLEN + nh_off;
	if ((void *)(nhp + 1) > end)
		return -1;
	*nhp = inner_nh;
	return 0;
}

/* What cached_outer returns besides a drop reason. */
#define PROXY_PUSH (-1)
#define PROXY_PASS (-2)

/* cached_outer checks cache entry ce before a push: PROXY_PUSH with *len
 * bytes of outer headers whose next header is at *nh_off, PROXY_PASS for
 * End.EAD whose SF was the last segment, else a drop reason. */
static __always_inline int cached_outer(const struct proxy_cache *ce, __u64 *len, __u32 *nh_off)
{
	__u64 l;

	if (ce->terminal)
		return PROXY_PASS; /* End.EAD, SF was the last segment */
	l = ce->len;
	*nh_off = ce->nh_off;
	/* Verifier: bound len for bpf_skb_store_bytes from the map value. */
	barrier_var(l);
	if (l < sizeof(struct ipv6hdr) || l > PROXY_HDR_MAX || *nh_off >= l)
		return PROXY_DROP_INTERNAL;
	*len = l;
	return PROXY_PUSH;
}

/* outbound_cache finds the cache a packet from the SF is pushed with: its
 * flow's (per-flow End.AD, expired entries deleted) or its SID's. -1, or a
 * drop reason. */
static __always_inline int outbound_cache(struct __sk_buff *skb, struct proxy_sid *cfg, __u8 inner,
					  struct proxy_cache **ce)
{
	struct proxy_flow_key fk;
	void *fm;

	if (!(cfg->flags & PROXY_F_FLOW)) {
		*ce = bpf_map_lookup_elem(&cache_map, &cfg->id);
		if (!*ce || !(*ce)->valid)
			return PROXY_DROP_CACHE_EMPTY;
		return -1;
	}
	if (flow_key(skb, ETH_HLEN, inner, cfg->id, &fk) < 0)
		return PROXY_DROP_TRUNCATED;
	fm = flows_of(cfg);
	if (!fm)
		return PROXY_DROP_INTERNAL;
	*ce = bpf_map_lookup_elem(fm, &fk);
	if (!*ce || !(*ce)->valid)
		return PROXY_DROP_FLOW_MISS;
	if (cfg->flow_timeout_ns && bpf_ktime_get_ns() - (*ce)->updated_ns > cfg->flow_timeout_ns) {
		bpf_map_delete_elem(fm, &fk);
		return PROXY_DROP_FLOW_EXPIRED;
	}
	return -1;
}

static __always_inline int outbound_push(struct __sk_buff *skb, struct proxy_sid *cfg,
					 struct proxy_stats *st)
{
	struct cursor c;
	struct ethhdr *eth;
	struct proxy_cache *ce;
	struct bpf_fib_lookup f = {};
	__u8 inner_nh, inner;
	__u64 len = 0; /* 64-bit so the bound checked is the one passed to helpers */
	__u32 inner_len, tot, nh_off = 0;
	long rc2;
	int rc, r;

	cursor_init_skb(&c, skb);
	eth = cursor_eth(&c);
	if (!eth)
		return pass(st);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = cursor_ipv6(&c);

		if (!ip6 || ipv6_addr_is_linklocal(&ip6->saddr) ||
		    ipv6_addr_is_linklocal(&ip6->daddr) || ipv6_addr_is_multicast(&ip6->daddr) ||
		    ipv6_addr_is_unspecified(&ip6->saddr))
			return pass(st);
		/* Neighbour discovery between the node and the SF may use
		 * global addresses (an NA answering our NS): never encapsulate. */
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			__u8 *type = cursor_pull(&c, 1);

			if (type && *type >= ICMPV6_ND_FIRST && *type <= ICMPV6_ND_LAST)
				return pass(st);
		}
		inner_nh = IPPROTO_IPV6;
		inner = PROXY_INNER_IPV6;
	} else if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4 = cursor_ipv4(&c);

		if (!ip4 || ipv4_is_local_scope(ip4->saddr) || ipv4_is_local_scope(ip4->daddr))
			return pass(st);
		inner_nh = IPPROTO_IPIP;
		inner = PROXY_INNER_IPV4;
	} else {
		return pass(st); /* ARP and other non-IP traffic */
	}

	r = outbound_cache(skb, cfg, inner, &ce);
	if (r >= 0)
		return drop(st, r);
	r = cached_outer(ce, &len, &nh_off);
	if (r == PROXY_PASS)
		return pass(st);
	if (r >= 0)
		return drop(st, r);
	inner_len = skb->len - ETH_HLEN;
	tot = inner_len + len;
	if (tot - sizeof(struct ipv6hdr) > 0xffff)
		return drop(st, PROXY_DROP_TOO_BIG);

	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	/* A GSO packet's segments keep the size the SF gave them (growing
	 * lowers gso_size by the encapsulation, below): no tot_len, so the
	 * FIB only checks the skb with is_skb_forwardable(), which lets GSO
	 * through. A non-GSO packet is checked at its encapsulated size. */
	f.tot_len = skb->gso_size ? 0 : tot;
	__builtin_memcpy(f.ipv6_src, &ce->hdr[offsetof(struct ipv6hdr, saddr)], 16);
	__builtin_memcpy(f.ipv6_dst, &ce->hdr[offsetof(struct ipv6hdr, daddr)], 16);
	rc = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED) {
		/* What Linux does for a too-big packet entering a seg6 encap
		 * route: an ICMP error to the inner source announcing the MTU
		 * less the encapsulation (IPv6: Packet Too Big; IPv4 with DF:
		 * Fragmentation Needed). IPv4 without DF would be fragmented by
		 * Linux; we cannot, so it is dropped and counted. */
		__u32 zero = 0, mtu = f.mtu_result;
		struct proxy_cache *s = bpf_map_lookup_elem(&scratch_map, &zero);
		int oif;

		if (!s)
			return drop(st, PROXY_DROP_MTU);
		if (inner == PROXY_INNER_IPV6) {
			mtu = mtu > len + IPV6_MIN_MTU ? mtu - len : IPV6_MIN_MTU;
			oif = icmp6_ptb(skb, mtu, s->hdr);
		} else {
			mtu = mtu > len + 68 ? mtu - len : 68; /* RFC 791 minimum */
			oif = icmp4_frag_needed(skb, mtu, s->hdr);
		}
		if (oif <= 0)
			return drop(st, PROXY_DROP_MTU);
		if (st)
			st->icmp_errors++;
		return bpf_redirect(oif, 0);
	}

	/* ENCAP_L3_IPV6 records the tunnel for GSO: encapsulation = 1, inner
	 * headers = the SF's packet, gso_type |= SKB_GSO_IPXIP6. It refuses
	 * (-EALREADY) an skb whose encapsulation bit is already set: that is
	 * the state the inbound half left (bpf_skb_net_shrink clears neither
	 * the bit nor SKB_GSO_IPXIP6), carried through the forwarding SF. In
	 * that state the inner_* offsets still point at the headers of the
	 * packet in front of which we push (the inbound half removed only
	 * what preceded them and the SF forwarded the skb in place) and
	 * gso_type still has SKB_GSO_IPXIP6 from the original SRv6
	 * encapsulation: exactly what the flag would set. So grow without it;
	 * gso_size is still lowered by len so each segment stays as large as
	 * the SF made it. */
	rc2 = bpf_skb_adjust_room(skb, len, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6);
	if (rc2 == -EALREADY) {
		if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
			rc2 = bpf_skb_adjust_room(skb, len, BPF_ADJ_ROOM_MAC, 0);
		} else {
			/* An IPv4 inner packet: skb->protocol must become IPv6
			 * too (bpf_redirect_neigh, the stack and GSO dispatch on
			 * it), which only the ENCAP flag (refused here) or a
			 * DECAP flag does. So grow 8 bytes more and strip them
			 * with DECAP_L3_IPV6 (gso_size: -len-8, then +8). */
			rc2 = bpf_skb_adjust_room(skb, len + 8, BPF_ADJ_ROOM_MAC, 0);
			if (rc2 == 0)
				rc2 = bpf_skb_adjust_room(skb, -8, BPF_ADJ_ROOM_MAC,
							  SEGCHAIN_ADJ_ROOM_DECAP_L3_IPV6);
		}
	}
	if (rc2 < 0)
		return drop(st, PROXY_DROP_ADJUST_ROOM);
	if (write_outer(skb, ce, len, tot, nh_off, inner_nh) < 0)
		return drop(st, PROXY_DROP_INTERNAL);
	return forward(skb, st, &f, rc);
}

/* outbound_push_eth: End.AS / End.AD with inner ethernet. Every frame from
 * the SF (an L2 segment: ARP, ND, anything but link-constrained control
 * frames) becomes the payload of the cached outer headers (Next Header 143)
 * behind a new Ethernet header.
 *
 * bpf_skb_change_head pushes the room in front of the whole frame for any
 * frame type (bpf_skb_adjust_room only takes IPv4/IPv6 skbs, and its ENCAP
 * flags refuse the encapsulation bit the inbound half leaves). It leaves
 * skb->protocol and the network header on the inner frame, which only a
 * direct bpf_redirect with the MACs from the FIB ignores; so:
 *  - the FIB must resolve the next hop's MAC; without a neighbour entry an
 *    IPv6 frame (skb->protocol IPv6, as bpf_redirect_neigh needs) goes
 *    through bpf_redirect_neigh, which resolves it; other frames, and
 *    anything the FIB cannot forward itself (local next SID, lwt route),
 *    are dropped and counted (no-fib): they cannot go to the stack;
 *  - GSO frames are dropped and counted (gso-ethernet): Linux has no GSO
 *    for an Ethernet payload in IPv6 (next header 143), so nothing could
 *    segment them after the encapsulation. */
static __always_inline int outbound_push_eth(struct __sk_buff *skb, struct proxy_sid *cfg,
					     struct proxy_stats *st)
{
	struct proxy_cache *ce;
	struct bpf_fib_lookup f = {};
	struct cursor c;
	struct ethhdr *eth;
	__u8 inner_nh = IPPROTO_ETHERNET;
	__u64 len = 0;
	__u32 tot, nh_off = 0, frame_len = skb->len;
	int rc, r;

	cursor_init_skb(&c, skb);
	eth = cursor_eth(&c);
	if (!eth)
		return pass(st);
	/* "non-local Ethernet frames" only (the research, the SR service
	 * programming draft): the IEEE 802.1 link-constrained group addresses
	 * 01:80:c2:00:00:00-0f (STP, LACP, LLDP...), which no bridge forwards,
	 * stay on the SF's link. */
	if (eth->h_dest[0] == 0x01 && eth->h_dest[1] == 0x80 && eth->h_dest[2] == 0xc2 &&
	    eth->h_dest[3] == 0 && eth->h_dest[4] == 0 && (eth->h_dest[5] & 0xf0) == 0)
		return pass(st);
	ce = bpf_map_lookup_elem(&cache_map, &cfg->id);
	if (!ce || !ce->valid)
		return drop(st, PROXY_DROP_CACHE_EMPTY);
	r = cached_outer(ce, &len, &nh_off);
	if (r == PROXY_PASS)
		return pass(st);
	if (r >= 0)
		return drop(st, r);
	tot = frame_len + len; /* the outer IPv6 packet: headers + the whole frame */
	if (tot - sizeof(struct ipv6hdr) > 0xffff)
		return drop(st, PROXY_DROP_TOO_BIG);
	if (skb->gso_size)
		return drop(st, PROXY_DROP_GSO_L2);

	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = tot;
	__builtin_memcpy(f.ipv6_src, &ce->hdr[offsetof(struct ipv6hdr, saddr)], 16);
	__builtin_memcpy(f.ipv6_dst, &ce->hdr[offsetof(struct ipv6hdr, daddr)], 16);
	rc = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return drop(st, PROXY_DROP_MTU); /* no ICMP error for a frame */
	if (rc != BPF_FIB_LKUP_RET_SUCCESS &&
	    !(rc == BPF_FIB_LKUP_RET_NO_NEIGH && skb->protocol == bpf_htons(ETH_P_IPV6)))
		return drop(st, PROXY_DROP_NO_FIB);

	if (bpf_skb_change_head(skb, (__u32)len + ETH_HLEN, 0) < 0)
		return drop(st, PROXY_DROP_ADJUST_ROOM);
	if (write_outer(skb, ce, len, tot, nh_off, inner_nh) < 0)
		return drop(st, PROXY_DROP_INTERNAL);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		struct bpf_redir_neigh nh = { .nh_family = AF_INET6 };

		if (st) {
			st->out_packets++;
			st->out_bytes += skb->len;
		}
		__builtin_memcpy(nh.ipv6_nh, f.ipv6_dst, sizeof(nh.ipv6_nh));
		return bpf_redirect_neigh(f.ifindex, &nh, sizeof(nh), 0);
	}
	return forward(skb, st, &f, rc);
}

static __always_inline int proxy_outbound(struct __sk_buff *skb, struct proxy_sid *cfg)
{
	struct proxy_stats *st = bpf_map_lookup_elem(&stats_map, &cfg->id);

	/* The SF's link is untagged. A frame with tags still in its data
	 * (the stack pulled only the first into skb->vlan_tci) would be
	 * untagged by the stack after us (priority tags, VID 0, however many)
	 * and routed as the IP packet inside, past the proxy: an SF could
	 * reach any SID or node that way. Ethernet mode carries whole frames,
	 * tags included. */
	if (cfg->inner != PROXY_INNER_ETH &&
	    (skb->protocol == bpf_htons(ETH_P_8021Q) || skb->protocol == bpf_htons(ETH_P_8021AD)))
		return drop(st, PROXY_DROP_VLAN);
	if (cfg->behavior == PROXY_AM)
		return outbound_am(skb, st);
	if (cfg->inner == PROXY_INNER_ETH)
		return outbound_push_eth(skb, cfg, st);
	return outbound_push(skb, cfg, st);
}

/* count_out_drop attributes a drop of the way back to its direction
 * (drops[] counts the reason, whichever the direction). */
static __always_inline int count_out_drop(struct proxy_sid *cfg, int verdict)
{
	struct proxy_stats *st;

	if (verdict == TC_ACT_SHOT) {
		st = bpf_map_lookup_elem(&stats_map, &cfg->id);
		if (st)
			st->out_drops++;
	}
	return verdict;
}

SEC("tc")
int proxy_tc(struct __sk_buff *skb)
{
	__u32 iif = skb->ingress_ifindex;
	struct proxy_sid *cfg = bpf_map_lookup_elem(&ifaces_map, &iif);

	if (cfg)
		return count_out_drop(cfg, proxy_outbound(skb, cfg));
	return proxy_inbound(skb);
}

char _license[] SEC("license") = "Dual BSD/GPL";

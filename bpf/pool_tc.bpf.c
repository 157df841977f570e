// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain pool selector (internal/pool/datapath, docs/pools.md): a TCX
 * program on egress of every interface of a chain's headend. The kernel's
 * seg6 encap route pushes the chain's SID list with the pool's placeholder
 * SID (its first instance's SID); this program finds that SID in the SRH,
 * hashes the inner flow (5-tuple, flow label fallback, optionally
 * canonical so both directions agree) and picks an instance by weighted
 * rendezvous hashing (HRW) over the instances the liveness map marks up:
 * every instance has `weight` slots, a slot's score is mix(flow, seed),
 * the highest score among live slots wins. A failed instance's flows move;
 * no other flow does. The chosen SID is written into the segment (and the
 * destination when it is the active one) and the packet re-routed by it.
 *
 * Policies when the flow's first choice is down (on_failure): failover
 * (next best live instance), bypass (the segment is removed from the SRH),
 * drop. With no live instance, failover falls back to all_down (bypass or
 * drop). Everything is counted per pool and instance.
 *
 * pool_in (session 12, the main path: docs/pools.md "The data path") is
 * the same choice made earlier, at TCX ingress of the headend, on the
 * plain packet: it classifies the packet against the chains of the
 * headend (pool_rules: their ip rules' selectors, in the rules' order),
 * chooses the instance as above and only sets skb->mark; an ip rule
 * (the chain's selectors + fwmark) sends the packet to a table of its
 * own per (chain, instance) whose route is that instance's complete SID
 * list, so the kernel's encap pushes it: no rewrite, no FIB lookup, no
 * MAC write here. pool_out then selects only what ingress could not see,
 * locally originated packets (no input device); forwarded ones pass. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define POOL_MAX 64       /* pools per headend */
#define POOL_INST_MAX 8   /* instances per pool */
#define POOL_SLOTS_MAX 32 /* sum of weights per pool */
#define POOL_SEGS_MAX 8   /* SRH segments scanned for pool SIDs */

#ifndef barrier_var
#define barrier_var(var) asm volatile("" : "=r"(var) : "0"(var))
#endif

#define POOL_TCX_NEXT (-1) /* TC_ACT_UNSPEC: the next TCX program decides */
#define REROUTE_FAIL (-1000)

#define ETH_LEN 14
#define IP6_LEN 40
#define SRH_OFF (ETH_LEN + IP6_LEN)
#define SEG_OFF(i) (SRH_OFF + 8 + 16 * (i))
#define DA_OFF (ETH_LEN + 24)
#define PLEN_OFF (ETH_LEN + 4)

#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Packets carrying this mark (the health checker's probes) pass untouched:
 * a probe names the instance it tests. 0 disables the check. */
volatile const __u32 pool_probe_mark = 0;

enum pool_flags {
	POOL_SYMMETRIC = 1 << 0,   /* hash the canonical 5-tuple */
	POOL_FAIL_BYPASS = 1 << 1, /* on_failure: bypass */
	POOL_FAIL_DROP = 1 << 2,   /* on_failure: drop */
	POOL_ALLDOWN_BYPASS = 1 << 3, /* failover with no live instance: bypass (else drop) */
	POOL_REBALANCE = 1 << 4, /* a recovered instance takes its old flows back */
};

/* Why the selector dropped a packet (the index of pool_drops); the quoted
 * names are what status, -o json and the metrics say (bpfconst). */
enum pool_drop_reason {
	POOL_DROP_POLICY,      /* "policy": on_failure or all_down say drop */
	POOL_DROP_FIB,         /* "no-route": no route to the chosen SID */
	POOL_DROP_REWRITE,     /* "rewrite": a helper failed to rewrite the packet */
	POOL_DROP_BYPASS_LAST, /* "bypass-last": bypass of the last segment, nothing to go to */
	POOL_DROP_MALFORMED,   /* "malformed": a pool SID in an SRH that does not hold its list exactly, or before an IP packet cut short */
	POOL_DROP_VLAN,        /* "vlan-tagged": a pool SID behind a VLAN tag in the frame (the selector rewrites untagged frames) */
	POOL_DROP_MAX,
};

struct pool_inst {
	__u8 sid[16];
	__u32 weight; /* its slots */
	__u32 pad;
};

/* pool_slot is one of an instance's weight slots: its seed is
 * mix64(fnv64a(SID) + r) for the instance's r-th slot, from the SID so
 * that adding, removing or reordering others never moves its flows. */
struct pool_slot {
	__u64 seed;
	__u32 inst;
	__u32 pad;
};

struct pool_conf {
	__u32 n;       /* instances */
	__u32 flags;   /* enum pool_flags */
	__u32 nslots; /* sum of the weights */
	__u32 pad;
	struct pool_inst inst[POOL_INST_MAX];
	struct pool_slot slot[POOL_SLOTS_MAX];
};

/* pool_stats are one pool's counters (per CPU). */
struct pool_stats {
	__u64 inst[POOL_INST_MAX]; /* packets sent to each instance */
	__u64 moved;   /* packets whose first choice was down (sent elsewhere) */
	__u64 bypass;  /* packets whose segment was removed */
	__u64 drop;    /* packets dropped by policy */
	__u64 errors;  /* dropped: no route, a failed rewrite */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POOL_MAX);
	__type(key, struct in6_addr); /* the placeholder SID */
	__type(value, __u32);         /* the pool's index */
} pool_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POOL_MAX);
	__type(key, __u32);
	__type(value, struct pool_conf);
} pool_confs SEC(".maps");

/* pool_live: bit i set = instance i healthy. Written by the health checker
 * (one word: a reader never sees half an update). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POOL_MAX);
	__type(key, __u32);
	__type(value, __u32);
} pool_live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POOL_MAX);
	__type(key, __u32);
	__type(value, struct pool_stats);
} pool_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POOL_MAX * POOL_DROP_MAX);
	__type(key, __u32); /* pool index * POOL_DROP_MAX + reason */
	__type(value, __u64);
} pool_drops SEC(".maps");

/* pool_moved remembers the flows failover moved: they stay where they
 * went when their instance comes back (only new flows return), unless
 * the pool rebalances. Forgotten after POOL_STICKY_NS idle or by LRU. */
#define POOL_STICKY_NS (60ULL * 1000 * 1000 * 1000)
#define POOL_MOVED_MAX 65536

struct pool_flow_key {
	__u32 pool;
	__u32 pad;
	__u64 hash;
};

struct pool_moved_val {
	__u32 inst;
	__u32 pad;
	__u64 seen; /* bpf_ktime_get_ns of the last packet */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POOL_MOVED_MAX);
	__type(key, struct pool_flow_key);
	__type(value, struct pool_moved_val);
} pool_moved SEC(".maps");

/* pool_sticky[id] is set once failover remembered a flow of the pool:
 * until then (the common case, no failure yet) the LRU lookup above is
 * skipped. Cleared when the pool is programmed anew. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POOL_MAX);
	__type(key, __u32);
	__type(value, __u32);
} pool_sticky SEC(".maps");

/* pool_nh caches the FIB's answer per destination SID for
 * POOL_NH_TTL_NS: a FIB lookup per packet was most of the selector's
 * cost (docs/pools.md); a route change reaches the selector within the
 * TTL. Unresolved neighbours are not cached. */
#define POOL_NH_TTL_NS (100ULL * 1000 * 1000)

struct pool_nh {
	__u8 macs[12]; /* destination then source MAC, as in the frame */
	__u32 ifindex;
	__u64 expires;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POOL_MAX * POOL_INST_MAX);
	__type(key, struct in6_addr);
	__type(value, struct pool_nh);
} pool_nhs SEC(".maps");

/* pool_inst_nh is pool_nhs for the instances' SIDs, indexed by
 * pool * POOL_INST_MAX + instance: an array lookup (inlined by the
 * verifier) instead of hashing the SID on every packet. An entry holds
 * its SID, so a pool programmed anew never uses another SID's answer. */
struct pool_inst_nh {
	__u8 sid[16];
	struct pool_nh nh;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POOL_MAX * POOL_INST_MAX);
	__type(key, __u32);
	__type(value, struct pool_inst_nh);
} pool_inst_nhs SEC(".maps");

/* pool_scratch passes the found segment's index from the scan to the
 * rewrite as a value the verifier does not know: otherwise each of the
 * scan's eight outcomes is verified through the whole rewrite apart
 * (too large a program). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} pool_scratch SEC(".maps");

/* The chains' classifier (pool_in): one entry per chain rule of the
 * headend that decides a pool's packets, in the rules' priority order
 * (a chain without a pool that comes first keeps its packets: pool
 * POOL_RULE_NONE). Prefixes as masked 64-bit words (IPv4: the address
 * in the first word's low bytes, network order). */
#define POOL_RULES_MAX 32
#define POOL_RULE_NONE 0xffffffffu
#define POOL_MARK_BYPASS 8        /* mark + 8: the table with the pool's segment removed */
#define POOL_MARK_TOP 0xff000000u /* a pool mark's top byte is pool_mark_base's */

enum pool_rule_flags {
	POOL_RULE_NOBYPASS = 1 << 0, /* no segment after the pool: bypass drops (bypass-last) */
};

struct pool_rule {
	__u64 src[2], src_mask[2];
	__u64 dst[2], dst_mask[2];
	__u32 family; /* 4 or 6 */
	__u32 proto;  /* 0: any */
	__u16 sport_lo, sport_hi, dport_lo, dport_hi; /* 0-0: any */
	__u32 ifindex; /* 0: any */
	__u32 pool;    /* pool id, POOL_RULE_NONE: not a pool's chain */
	__u32 mark;    /* + instance, + POOL_MARK_BYPASS */
	__u32 flags;   /* enum pool_rule_flags */
};

/* pool_rules holds two rule sets: pool_rsel[0] names the one in use;
 * apply writes the other and then flips it (a reader never sees a set
 * half written). One lookup per packet for the whole set. */
struct pool_ruleset {
	__u32 n;
	__u32 pad;
	struct pool_rule r[POOL_RULES_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct pool_ruleset);
} pool_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} pool_rsel SEC(".maps");

/* The marks pool_in sets are pool_mark_base | chain table << 4 | k: the
 * top byte says "chosen at ingress" (pool_out lets them pass). 0: no
 * marks (pool_out selects every packet, as before session 12). */
volatile const __u32 pool_mark_base = 0;

/* Referenced so that bpf2go emits the Go types (-type). */
const enum pool_drop_reason *pool_drop_reason_type __attribute__((unused));
const enum pool_flags *pool_flags_type __attribute__((unused));
const enum pool_rule_flags *pool_rule_flags_type __attribute__((unused));

/* mix64 is splitmix64's finaliser: every input bit flips each output bit
 * with probability ~1/2. internal/pool's Mix is the same function. */
static __always_inline __u64 mix64(__u64 z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The flow key: both addresses as four 32-bit words in network order
 * (IPv4: the first word, the rest 0), the ports (or the IPv6 flow label)
 * and the protocol. internal/pool's FlowKey.Hash hashes the same words. */
struct flow {
	__u32 a[4];
	__u32 b[4];
	__u16 pa, pb;
	__u32 proto;
};

/* pool_fcache remembers, per CPU, the hash of the last flows seen
 * (direct-mapped by a cheap fold of the flow): the hash is ten rounds of
 * mix64, most of what selecting costs once the helpers are gone, and the
 * packets of a flow come in runs. An entry holds the whole flow key, so a
 * hit is the hash flow_hash would compute: the choice never changes. */
#define POOL_FCACHE 256

struct pool_fc {
	struct flow f;
	__u64 h;
	__u32 sym;
	__u32 valid;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POOL_FCACHE);
	__type(key, __u32);
	__type(value, struct pool_fc);
} pool_fcache SEC(".maps");

static __always_inline int same_flow(const struct flow *x, const struct flow *y)
{
	const __u32 *p = (const void *)x, *q = (const void *)y;
	__u32 d = 0;
#pragma unroll
	for (int i = 0; i < sizeof(struct flow) / 4; i++)
		d |= p[i] ^ q[i];
	return d == 0;
}

static __always_inline int addr_less(const __u32 *x, const __u32 *y)
{
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u32 p = bpf_ntohl(x[i]), q = bpf_ntohl(y[i]);
		if (p != q)
			return p < q;
	}
	return 0;
}

static __always_inline __u64 flow_hash(struct flow *f, int symmetric)
{
	__u32 *a = f->a, *b = f->b;
	__u16 pa = f->pa, pb = f->pb;
	__u64 h = 0x5eedc4a1u;

	if (symmetric && (addr_less(b, a) || (!addr_less(a, b) && pb < pa))) {
		a = f->b;
		b = f->a;
		pa = f->pb;
		pb = f->pa;
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
		h = mix64(h ^ bpf_ntohl(a[i]));
#pragma unroll
	for (int i = 0; i < 4; i++)
		h = mix64(h ^ bpf_ntohl(b[i]));
	h = mix64(h ^ (((__u64)pa << 16) | pb));
	return mix64(h ^ f->proto);
}

/* linear makes the frame's first need bytes (at most its length) direct
 * packet data: a no-op when they already are (every header the kernel's
 * encap pushed, and the inner headers of all but paged frames). The
 * caller re-reads skb->data and checks its bounds as before: a frame
 * shorter than need fails that check, as bpf_skb_load_bytes would. */
static __always_inline void linear(struct __sk_buff *skb, __u32 need)
{
	/* Capped first: a short frame that is all linear (a 64-byte packet
	 * asked for the 78 bytes of pool_in's headers) must not pay a helper
	 * call that has nothing to pull (session 17: every minimum-size
	 * packet called bpf_skb_pull_data). */
	if (need > skb->len)
		need = skb->len;
	if ((long)skb->data + need <= (long)skb->data_end)
		return;
	bpf_skb_pull_data(skb, need);
}

/* inner_flow reads the inner packet at off (after the SRH): IPv6 or IPv4
 * (nexthdr 41 or 4). Ports of TCP, UDP and SCTP; for anything else, and an
 * IPv4 fragment, ports 0 (IPv6: the flow label instead). -1: an IP inner
 * packet cut short (malformed); -2: not IP. Direct packet access (the
 * caller made the headers linear). */
static __always_inline int inner_flow(struct __sk_buff *skb, __u32 off, __u8 nh, struct flow *f)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u16 ports[2] = {0, 0};
	__u8 proto;

	if (off > 0xffff)
		return -1;
	if (nh == IPPROTO_IPV6) {
		struct ipv6hdr *ip = data + off;
		if ((void *)(ip + 1) > end)
			return -1;
		__builtin_memcpy(f->a, &ip->saddr, 16);
		__builtin_memcpy(f->b, &ip->daddr, 16);
		proto = ip->nexthdr;
		if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
			__u16 *l4 = (void *)(ip + 1);
			if ((void *)(l4 + 2) > end)
				return -1;
			ports[0] = l4[0];
			ports[1] = l4[1];
		} else {
			/* The flow label stands in for the ports (RFC 6437):
			 * the same on every packet of a flow. */
			__u32 fl = ((ip->flow_lbl[0] & 0x0f) << 16) | (ip->flow_lbl[1] << 8) | ip->flow_lbl[2];
			ports[0] = bpf_htons(fl >> 16);
			ports[1] = bpf_htons(fl & 0xffff);
		}
	} else if (nh == IPPROTO_IPIP) {
		struct iphdr *ip = data + off;
		if ((void *)(ip + 1) > end)
			return -1;
		__builtin_memset(f, 0, sizeof(*f));
		f->a[0] = ip->saddr;
		f->b[0] = ip->daddr;
		proto = ip->protocol;
		if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) &&
		    !(ip->frag_off & bpf_htons(0x1fff))) {
			__u16 *l4 = (void *)ip + ip->ihl * 4;
			if ((void *)(l4 + 2) > end)
				return -1;
			ports[0] = l4[0];
			ports[1] = l4[1];
		}
	} else {
		return -2; /* not IP (an L2 chain's Ethernet, no next header): hash 0 */
	}
	f->pa = bpf_ntohs(ports[0]);
	f->pb = bpf_ntohs(ports[1]);
	f->proto = proto;
	return 0;
}

/* flow_hash_cached is flow_hash(f, sym) from the per-CPU cache when it
 * holds the flow (and the cache then holds it). */
static __always_inline __u64 flow_hash_cached(const struct flow *f, __u32 sym)
{
	/* The fold is symmetric, so both directions share a slot. */
	__u32 x = f->a[0] ^ f->a[1] ^ f->a[2] ^ f->a[3] ^ f->b[0] ^ f->b[1] ^ f->b[2] ^ f->b[3] ^ f->pa ^ f->pb ^ f->proto;
	x ^= x >> 16;
	x = (x ^ (x >> 8)) & (POOL_FCACHE - 1);
	struct pool_fc *fc = bpf_map_lookup_elem(&pool_fcache, &x);
	if (fc && fc->valid && fc->sym == sym && same_flow(&fc->f, f))
		return fc->h;
	struct flow c = *f;
	__u64 h = flow_hash(&c, sym);
	if (fc) {
		fc->f = *f;
		fc->h = h;
		fc->sym = sym;
		fc->valid = 1;
	}
	return h;
}

/* flow_of sets *h to the hash of the inner packet at off (0 when it is
 * not IP), from the per-CPU cache when it holds the flow; -1: an IP
 * inner packet cut short. */
static __always_inline int flow_of_inl(struct __sk_buff *skb, __u32 off, __u8 nh, __u32 sym, __u64 *h)
{
	struct flow f;

	__builtin_memset(&f, 0, sizeof(f));
	int fr = inner_flow(skb, off, nh, &f);
	if (fr == -1)
		return -1;
	if (fr != 0) {
		*h = 0;
		return 0;
	}
	*h = flow_hash_cached(&f, sym);
	return 0;
}

/* pool_out's copy out of line (its verification stays linear); pool_in
 * inlines the body: a BPF-to-BPF call's return goes through the return
 * thunk of this CPU's SRSO mitigation, a measurable part of the ingress
 * program's cost (docs/pools.md "What it costs"). */
static __attribute__((noinline)) int flow_of(struct __sk_buff *skb, __u32 off, __u8 nh, __u32 sym, __u64 *h)
{
	return flow_of_inl(skb, off, nh, sym, h);
}

/* pool_choose returns the instance of c with the flow's highest live
 * slot and its highest slot overall, packed: (any + 1) | (live + 1) << 8
 * (0: none). One flat loop over the slots keeps the verifier's work
 * linear; a global function, so that it is verified once on its own
 * rather than once per path that reaches it. */
static __always_inline int choose_inl(struct pool_conf *c, __u32 live, __u64 h)
{
	__u64 best_any = 0, best_live = 0;
	int a = -1, l = -1;

	if (!c)
		return 0;
	for (int k = 0; k < POOL_SLOTS_MAX; k++) {
		if (k >= c->nslots)
			break;
		__u32 i = c->slot[k].inst;
		if (i >= POOL_INST_MAX)
			continue;
		__u64 s = mix64(h ^ c->slot[k].seed);
		if (a < 0 || s > best_any) {
			best_any = s;
			a = i;
		}
		if (((live >> i) & 1) && (l < 0 || s > best_live)) {
			best_live = s;
			l = i;
		}
	}
	return (a + 1) | ((l + 1) << 8);
}

/* pool_out's copy: a global function, verified once on its own. */
__attribute__((noinline)) int pool_choose(struct pool_conf *c, __u32 live, __u64 h)
{
	return choose_inl(c, live, h);
}

static __always_inline int same_sid(const __u8 *a, const __u8 *b)
{
	const __u64 *x = (const void *)a, *y = (const void *)b;
	return x[0] == y[0] && x[1] == y[1];
}

static __always_inline void count_drop(__u32 id, __u32 reason)
{
	__u32 k = id * POOL_DROP_MAX + reason;
	__u64 *v = bpf_map_lookup_elem(&pool_drops, &k);
	if (v)
		*v += 1;
}

#define POOL_DEC_PASS (-1)   /* not selected: the packet goes on as it is */
#define POOL_DEC_BYPASS (-2) /* the pool's segment is to be removed (counted by the caller) */
#define POOL_DEC_DROP (-3)   /* dropped by policy (counted) */

/* pool_decide is the choice for a flow of hash h in pool id: its
 * instance (counted, and a moved flow remembered), or POOL_DEC_*. One
 * function for pool_in and pool_out: the same HRW, moved-flows LRU and
 * policies (internal/pool's Decide is the model). */
static __always_inline int pool_decide(__u32 id, struct pool_conf *c, struct pool_stats *st, __u32 live, __u64 h, int inl)
{
	int ch = inl ? choose_inl(c, live, h) : pool_choose(c, live, h);
	int any = (ch & 0xff) - 1, pick = ((ch >> 8) & 0xff) - 1;
	if (any < 0)
		return POOL_DEC_PASS;

	/* A flow failover moved stays on its instance while that is live. */
	struct pool_flow_key fk = {.pool = id, .hash = h};
	int sticky = 0;
	__u32 *has_moved = bpf_map_lookup_elem(&pool_sticky, &id);
	if (!(c->flags & POOL_REBALANCE) && has_moved && *has_moved) {
		struct pool_moved_val *mv = bpf_map_lookup_elem(&pool_moved, &fk);
		if (mv) {
			__u64 now = bpf_ktime_get_ns();
			if (mv->inst < POOL_INST_MAX && ((live >> mv->inst) & 1) && now - mv->seen < POOL_STICKY_NS) {
				if (mv->inst != (__u32)any) {
					pick = mv->inst;
					sticky = 1;
				}
				mv->seen = now;
			} else {
				bpf_map_delete_elem(&pool_moved, &fk);
			}
		}
	}

	if (pick != any && !sticky) {
		int action = 0;
		if (c->flags & POOL_FAIL_BYPASS)
			action = 1;
		else if (c->flags & POOL_FAIL_DROP)
			action = 2;
		else if (pick < 0)
			action = (c->flags & POOL_ALLDOWN_BYPASS) ? 1 : 2;
		if (action == 2) {
			st->drop++;
			count_drop(id, POOL_DROP_POLICY);
			return POOL_DEC_DROP;
		}
		if (action == 1)
			return POOL_DEC_BYPASS;
	}
	if (pick < 0 || pick >= POOL_INST_MAX)
		return POOL_DEC_PASS;
	/* pick is in range: the mask only shows the verifier so
	 * (barrier_var: clang would drop a mask it proves useless). */
	__u32 p = (__u32)pick;
	barrier_var(p);
	p &= POOL_INST_MAX - 1;
	if (pick != any) {
		st->moved++;
		if (!sticky && !(c->flags & POOL_REBALANCE)) {
			struct pool_moved_val mv = {.inst = p, .seen = bpf_ktime_get_ns()};
			bpf_map_update_elem(&pool_moved, &fk, &mv, BPF_ANY);
			if (has_moved && !*has_moved)
				*has_moved = 1;
		}
	}
	st->inst[p]++;
	return p;
}

/* reroute sends the packet by its (new) destination: the FIB's next hop
 * (cached per destination), possibly another interface than the one it
 * was routed to. */
static __attribute__((noinline)) int reroute(struct __sk_buff *skb)
{
	struct bpf_fib_lookup p = {};
	struct ipv6hdr ip;
	struct pool_nh nh = {};
	__u64 now = bpf_ktime_get_ns();
	long rc;

	if (bpf_skb_load_bytes(skb, ETH_LEN, &ip, sizeof(ip)))
		return REROUTE_FAIL;
	struct pool_nh *c = bpf_map_lookup_elem(&pool_nhs, &ip.daddr);
	if (c && now < c->expires) {
		nh = *c;
	} else {
		p.family = AF_INET6;
		p.ifindex = skb->ifindex;
		__builtin_memcpy(p.ipv6_src, &ip.saddr, 16);
		__builtin_memcpy(p.ipv6_dst, &ip.daddr, 16);
		rc = bpf_fib_lookup(skb, &p, sizeof(p), BPF_FIB_LOOKUP_OUTPUT);
		if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
			return bpf_redirect_neigh(p.ifindex, 0, 0, 0);
		if (rc != BPF_FIB_LKUP_RET_SUCCESS)
			return REROUTE_FAIL;
		__builtin_memcpy(nh.macs, p.dmac, ETH_ALEN);
		__builtin_memcpy(nh.macs + ETH_ALEN, p.smac, ETH_ALEN);
		nh.ifindex = p.ifindex;
		nh.expires = now + POOL_NH_TTL_NS;
		bpf_map_update_elem(&pool_nhs, &ip.daddr, &nh, BPF_ANY);
	}
	if (bpf_skb_store_bytes(skb, 0, nh.macs, 2 * ETH_ALEN, 0))
		return REROUTE_FAIL;
	if (nh.ifindex == skb->ifindex)
		return POOL_TCX_NEXT;
	return bpf_redirect(nh.ifindex, 0);
}

/* bypass removes segment i (i <= sl) from the SRH: bpf_skb_adjust_room
 * takes 16 bytes right after the IPv6 header, the segments after i in
 * memory order (i+1..) are then already where they belong, and the fixed
 * header and segments 0..i-1 are written back in front of them. */
static __attribute__((noinline)) int bypass(struct __sk_buff *skb, __u32 i, struct ipv6_sr_hdr *srh, int *da_changed)
{
	__u8 segs[POOL_SEGS_MAX][16];
	struct ipv6_sr_hdr h = *srh;
	__u16 plen;

	if (i >= POOL_SEGS_MAX || h.first_segment == 0)
		return -1;
	for (int k = 0; k < POOL_SEGS_MAX; k++) {
		if (k >= i)
			break;
		if (bpf_skb_load_bytes(skb, SEG_OFF(k), segs[k], 16))
			return -1;
	}
	if (bpf_skb_load_bytes(skb, PLEN_OFF, &plen, 2))
		return -1;
	if (bpf_skb_adjust_room(skb, -16, BPF_ADJ_ROOM_NET, 0))
		return -1;
	h.hdrlen -= 2;
	h.first_segment -= 1;
	*da_changed = 0;
	if (i == h.segments_left) {
		/* The active segment goes: the next one becomes active. */
		h.segments_left -= 1;
		*da_changed = 1;
	} else if (i < h.segments_left) {
		h.segments_left -= 1;
	}
	plen = bpf_htons(bpf_ntohs(plen) - 16);
	if (bpf_skb_store_bytes(skb, PLEN_OFF, &plen, 2, 0) ||
	    bpf_skb_store_bytes(skb, SRH_OFF, &h, 8, 0))
		return -1;
	for (int k = 0; k < POOL_SEGS_MAX; k++) {
		if (k >= i)
			break;
		if (bpf_skb_store_bytes(skb, SEG_OFF(k), segs[k], 16, 0))
			return -1;
	}
	if (*da_changed) {
		__u32 a = h.segments_left;
		if (a >= POOL_SEGS_MAX || bpf_skb_load_bytes(skb, SEG_OFF(a), segs[0], 16) ||
		    bpf_skb_store_bytes(skb, DA_OFF, segs[0], 16, 0))
			return -1;
	}
	return 0;
}

/* reroute_inst is reroute for a packet whose destination is now instance
 * p's SID: the next hop cached per instance (a per-CPU array slot: no
 * hashing of the SID, no torn entry between CPUs), the coarse clock for
 * its TTL. */
/* inst_nh_refresh asks the FIB for the next hop to sid and caches it in
 * e (0), or returns what the packet's verdict is: bpf_redirect_neigh's
 * when the neighbour is unresolved, REROUTE_FAIL without a route. Out of
 * line: the common path does not carry its stack. */
static __attribute__((noinline)) int inst_nh_refresh(struct __sk_buff *skb, struct pool_inst_nh *e, const __u8 *sid, __u64 now)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct bpf_fib_lookup fp = {};
	long rc;

	if (!e || data + ETH_LEN + IP6_LEN > end)
		return REROUTE_FAIL;
	fp.family = AF_INET6;
	fp.ifindex = skb->ifindex;
	__builtin_memcpy(fp.ipv6_src, data + ETH_LEN + 8, 16);
	__builtin_memcpy(fp.ipv6_dst, sid, 16);
	rc = bpf_fib_lookup(skb, &fp, sizeof(fp), BPF_FIB_LOOKUP_OUTPUT);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(fp.ifindex, 0, 0, 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return REROUTE_FAIL;
	__builtin_memcpy(e->nh.macs, fp.dmac, ETH_ALEN);
	__builtin_memcpy(e->nh.macs + ETH_ALEN, fp.smac, ETH_ALEN);
	e->nh.ifindex = fp.ifindex;
	e->nh.expires = now + POOL_NH_TTL_NS;
	__builtin_memcpy(e->sid, sid, 16);
	return 0;
}

/* reroute_inst is reroute for a packet whose destination is now instance
 * p's SID: the next hop cached per instance (a per-CPU array slot: no
 * hashing of the SID, no torn entry between CPUs), the coarse clock for
 * its TTL. */
static __always_inline int reroute_inst(struct __sk_buff *skb, __u32 id, __u32 p, const __u8 *sid)
{
	__u32 k = id * POOL_INST_MAX + p;
	struct pool_inst_nh *e = bpf_map_lookup_elem(&pool_inst_nhs, &k);
	__u64 now = bpf_ktime_get_coarse_ns();
	void *data, *end;

	if (!e)
		return REROUTE_FAIL;
	if (now >= e->nh.expires || !same_sid(e->sid, sid)) {
		int rc = inst_nh_refresh(skb, e, sid, now);
		if (rc)
			return rc;
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (data + ETH_LEN > end)
		return REROUTE_FAIL;
	/* The MACs written directly, only when they change (mostly the
	 * placeholder's next hop is the instance's). */
	__u32 *m = data;
	const __u32 *w = (const void *)e->nh.macs;
	if ((m[0] ^ w[0]) | (m[1] ^ w[1]) | (m[2] ^ w[2])) {
		m[0] = w[0];
		m[1] = w[1];
		m[2] = w[2];
	}
	if (e->nh.ifindex == skb->ifindex)
		return POOL_TCX_NEXT;
	return bpf_redirect(e->nh.ifindex, 0);
}

static __always_inline int pool_apply(struct __sk_buff *skb, struct ipv6_sr_hdr *srhp, __u32 i, __u32 id, __u32 inner, __u8 *seg)
{
	struct ipv6_sr_hdr srh = *srhp;

	struct pool_conf *c = bpf_map_lookup_elem(&pool_confs, &id);
	struct pool_stats *st = bpf_map_lookup_elem(&pool_counters, &id);
	__u32 *lv = bpf_map_lookup_elem(&pool_live, &id);
	if (!c || !st || !lv)
		return POOL_TCX_NEXT;
	__u32 live = *lv;

	__u64 h = 0;
	if (flow_of(skb, inner, srh.nexthdr, !!(c->flags & POOL_SYMMETRIC), &h)) {
		st->errors++;
		count_drop(id, POOL_DROP_MALFORMED);
		return TC_ACT_SHOT;
	}

	int d = pool_decide(id, c, st, live, h, 0);
	if (d == POOL_DEC_PASS)
		return POOL_TCX_NEXT;
	if (d == POOL_DEC_DROP)
		return TC_ACT_SHOT;
	int da_changed = 0, rc;
	if (d == POOL_DEC_BYPASS) {
		if (i == 0) {
			st->errors++;
			count_drop(id, POOL_DROP_BYPASS_LAST);
			return TC_ACT_SHOT;
		}
		if (bypass(skb, i, &srh, &da_changed)) {
			st->errors++;
			count_drop(id, POOL_DROP_REWRITE);
			return TC_ACT_SHOT;
		}
		st->bypass++;
		if (!da_changed)
			return POOL_TCX_NEXT;
		rc = reroute(skb);
	} else {
		__u32 p = (__u32)d;
		barrier_var(p);
		p &= POOL_INST_MAX - 1;
		if (same_sid(seg, c->inst[p].sid))
			return POOL_TCX_NEXT; /* the placeholder is the choice */
		/* Written directly (session 11, by measurement: the two
		 * bpf_skb_store_bytes calls were most of the rewrite's cost).
		 * A direct write gives the program the verifier's unclone
		 * prologue: a cloned skb (the host's own TCP segments) pays a
		 * bpf_skb_pull_data(skb, 0), which copies nothing for TCP's
		 * clones (their headers are private: skb_clone_writable). */
		void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
		__u8 *sp = data + SEG_OFF(i);
		if ((void *)(sp + 16) > end) {
			st->errors++;
			count_drop(id, POOL_DROP_REWRITE);
			return TC_ACT_SHOT;
		}
		__builtin_memcpy(sp, c->inst[p].sid, 16);
		if (i != srh.segments_left)
			return POOL_TCX_NEXT;
		/* DA_OFF + 16 <= SEG_OFF(0): within the bounds checked above. */
		__builtin_memcpy(data + DA_OFF, c->inst[p].sid, 16);
		rc = reroute_inst(skb, id, p, c->inst[p].sid);
	}
	if (rc == REROUTE_FAIL) {
		st->errors++;
		count_drop(id, POOL_DROP_FIB);
		return TC_ACT_SHOT;
	}
	return rc;
}

/* tagged_pool: a frame with one VLAN tag in it (the VLAN device's own
 * selector saw it untagged; this one is on the lower device) whose SRH
 * holds a pool's SID is dropped and counted rather than sent on to the
 * placeholder: the selector rewrites untagged frames only. */
static __attribute__((noinline)) int tagged_pool(struct __sk_buff *skb)
{
	struct ipv6_sr_hdr srh;
	__u8 nh, seg[16];
	__be16 et;

	if (bpf_skb_load_bytes(skb, ETH_LEN + 2, &et, 2) || et != bpf_htons(ETH_P_IPV6) ||
	    bpf_skb_load_bytes(skb, ETH_LEN + 4 + 6, &nh, 1) || nh != IPPROTO_ROUTING ||
	    bpf_skb_load_bytes(skb, SRH_OFF + 4, &srh, sizeof(srh)) || srh.type != IPV6_SRCRT_TYPE_4)
		return POOL_TCX_NEXT;
	for (int k = 0; k < POOL_SEGS_MAX; k++) {
		if (k > srh.segments_left)
			break;
		if (bpf_skb_load_bytes(skb, SEG_OFF(k) + 4, seg, 16))
			break;
		__u32 *pid = bpf_map_lookup_elem(&pool_sids, seg);
		if (pid) {
			__u32 id = *pid;
			struct pool_stats *st = bpf_map_lookup_elem(&pool_counters, &id);
			if (st)
				st->errors++;
			count_drop(id, POOL_DROP_VLAN);
			return TC_ACT_SHOT;
		}
	}
	return POOL_TCX_NEXT;
}

SEC("tcx/egress")
int pool_out(struct __sk_buff *skb)
{
	struct ipv6_sr_hdr srh;
	void *data, *end;
	__u8 seg[16];
	__u32 nsegs;

	/* A forwarded packet (it has an input device) met pool_in at its
	 * ingress: a pool chain's was chosen and marked there, any other is
	 * no pool's. Only the headend's own packets are selected here, so
	 * forwarded traffic pays one compare (docs/pools.md "What it
	 * costs": scanning every forwarded SRH cost 5 %). */
	if (skb->ingress_ifindex)
		return POOL_TCX_NEXT;
	if (pool_probe_mark && skb->mark == pool_probe_mark)
		return POOL_TCX_NEXT;
	/* Chosen at ingress (pool_in): its table's route pushed the
	 * instance's SID list; no second selection. */
	if (pool_mark_base && (skb->mark & POOL_MARK_TOP) == pool_mark_base)
		return POOL_TCX_NEXT;
	if (skb->protocol == bpf_htons(ETH_P_8021Q) || skb->protocol == bpf_htons(ETH_P_8021AD))
		return tagged_pool(skb);
	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return POOL_TCX_NEXT;
	/* Direct packet reads throughout the common path (a helper call per
	 * header was most of the selector's cost: docs/pools.md). */
	linear(skb, SRH_OFF + 8);
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	if (data + SRH_OFF + 8 > end)
		return POOL_TCX_NEXT;
	if (((struct ipv6hdr *)(data + ETH_LEN))->nexthdr != IPPROTO_ROUTING)
		return POOL_TCX_NEXT;
	srh = *(struct ipv6_sr_hdr *)(data + SRH_OFF);
	if (srh.type != IPV6_SRCRT_TYPE_4)
		return POOL_TCX_NEXT;
	nsegs = (__u32)srh.first_segment + 1;
	/* The segments to scan linear (the packets of other chains pay no
	 * more than that). */
	linear(skb, SEG_OFF((srh.segments_left < POOL_SEGS_MAX ? srh.segments_left : POOL_SEGS_MAX - 1) + 1));
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;

	/* Scan the segments still to visit (0..SL) for a pool's SID. One
	 * pool per packet: a chain with two pools is rewritten at its first
	 * (segment order: the highest index is visited first). */
	__u32 i = 0, id = 0;
	int found = 0;
	for (int k = POOL_SEGS_MAX - 1; k >= 0; k--) {
		if (k > srh.segments_left)
			continue;
		__u8 *s = data + SEG_OFF(k);
		if ((void *)(s + 16) > end)
			return POOL_TCX_NEXT;
		__u32 *pid = bpf_map_lookup_elem(&pool_sids, s);
		if (pid) {
			i = k;
			id = *pid;
			__builtin_memcpy(seg, s, 16);
			found = 1;
			break;
		}
	}
	if (!found)
		return POOL_TCX_NEXT; /* not a pool's packet: not ours to judge */
	if (srh.hdrlen != 2 * nsegs || srh.segments_left > srh.first_segment) {
		/* A pool's packet whose SRH does not hold its list exactly
		 * (or has TLVs, which H.Encaps of a pool's chain never adds):
		 * dropped and counted, not sent on to the placeholder. */
		struct pool_stats *st = bpf_map_lookup_elem(&pool_counters, &id);
		if (st)
			st->errors++;
		count_drop(id, POOL_DROP_MALFORMED);
		return TC_ACT_SHOT;
	}
	__u32 zero = 0, *sc = bpf_map_lookup_elem(&pool_scratch, &zero);
	if (!sc)
		return POOL_TCX_NEXT;
	*sc = i;
	i = *sc & (POOL_SEGS_MAX - 1);
	/* A pool's packet: its whole SRH and the inner packet's headers
	 * (IPv4 with options and ports: 64 bytes) linear, so that
	 * pool_apply reads them directly. */
	linear(skb, SEG_OFF(nsegs) + 64);
	return pool_apply(skb, &srh, i, id, SEG_OFF(nsegs), seg);
}

/* The plain packet as the chains' rules see it (pool_in), and what the
 * flow key needs besides when pkt_of read it on the way (fkey): the
 * common packet is parsed once for both. */
struct pool_pkt {
	__u64 src[2], dst[2];
	__u32 family, proto;
	__u16 sport, dport;
	__u32 label; /* IPv6: the flow label */
	__u32 fkey;  /* 1: the flow key is these fields (pkt_flow) */
};

/* The IPv6 extension headers the kernel's flow dissector walks to the
 * transport header (hop-by-hop, routing, destination options), and how
 * many of them it passes over at most (MAX_FLOW_DISSECT_HDRS; 16 on this
 * kernel, checked against its rule lookup by
 * TestIngressAgreesWithKernelRules). */
#define POOL_NH_HOPOPTS 0
#define POOL_NH_ROUTING 43
#define POOL_NH_FRAGMENT 44
#define POOL_NH_DSTOPTS 60
#define POOL_EXT_MAX 16

/* ports_off: where the flow dissector reads a protocol's ports
 * (proto_ports_offset: TCP, UDP, DCCP, ESP, SCTP, UDP-Lite at 0, AH at
 * 4); -1: it reads none. */
static __always_inline int ports_off(__u32 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_DCCP:
	case IPPROTO_ESP:
	case IPPROTO_SCTP:
	case IPPROTO_UDPLITE:
		return 0;
	case IPPROTO_AH:
		return 4;
	}
	return -1;
}

/* pkt_ext6 walks an IPv6 packet's extension headers from off (the first
 * one's, whose type is k->proto) as the kernel's rule lookup dissects
 * them (fib6_rules_early_flow_dissect): hop-by-hop, routing and
 * destination options are passed over; a fragment header ends the walk
 * with its next header as the protocol and no ports (not even in a
 * first fragment); so do a header cut short and the dissector's limit,
 * with the last type read as the protocol. Sets k->proto and *l4off
 * (0: no ports). Only packets with extension headers pay for it. */
static __always_inline void pkt_ext6(struct __sk_buff *skb, struct pool_pkt *k, __u32 off, __u32 *l4off)
{
	__u8 h[2];

	*l4off = 0;
	for (int i = 0; i <= POOL_EXT_MAX; i++) {
		__u32 t = k->proto;

		if (t != POOL_NH_HOPOPTS && t != POOL_NH_ROUTING && t != POOL_NH_DSTOPTS && t != POOL_NH_FRAGMENT) {
			*l4off = off;
			return;
		}
		if (i == POOL_EXT_MAX || off > 0xffff || bpf_skb_load_bytes(skb, off, h, sizeof(h)))
			return;
		k->proto = h[0];
		if (t == POOL_NH_FRAGMENT)
			return;
		off += ((__u32)h[1] + 1) * 8;
	}
}

/* pkt_of reads the addresses, protocol and ports the kernel's rule
 * lookup matches on (fib rules' flow dissection: the transport header
 * behind IPv6 extension headers, ports where proto_ports_offset has
 * them, none for a fragment). 0: parsed; -1: not an IP packet this can
 * classify. */
static __always_inline int flow_ports(__u32 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP;
}

static __always_inline int pkt_of(struct __sk_buff *skb, struct pool_pkt *k, __u8 *nh, __u32 l3)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u32 l4off, ext = 0;
	__u16 pt[2];
	int po;

	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip = data + l3;
		if ((void *)(ip + 1) > end)
			return -1;
		__builtin_memcpy(k->src, &ip->saddr, 16);
		__builtin_memcpy(k->dst, &ip->daddr, 16);
		k->family = 6;
		k->proto = ip->nexthdr;
		k->label = ((ip->flow_lbl[0] & 0x0f) << 16) | (ip->flow_lbl[1] << 8) | ip->flow_lbl[2];
		*nh = IPPROTO_IPV6;
		pkt_ext6(skb, k, l3 + sizeof(*ip), &l4off);
		ext = l4off != l3 + sizeof(*ip); /* passed over extension headers (or stopped at one) */
		/* The flow key reads the first next header only: without
		 * extension headers it is the classifier's protocol, and the
		 * flow label stands in for the ports of the others. */
		k->fkey = !ext && !flow_ports(k->proto);
	} else if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + l3;
		if ((void *)(ip + 1) > end)
			return -1;
		k->src[0] = ip->saddr;
		k->dst[0] = ip->daddr;
		k->family = 4;
		k->proto = ip->protocol;
		*nh = IPPROTO_IPIP;
		if (ip->frag_off & bpf_htons(0x3fff)) /* MF or an offset: the flow key reads it itself */
			return 0;
		l4off = l3 + ip->ihl * 4;
		k->fkey = !flow_ports(k->proto); /* ports 0 in the flow key */
	} else {
		return -1;
	}
	po = ports_off(k->proto);
	if (!l4off || po < 0)
		return 0;
	/* Read directly where the caller made it linear (IPv4 options and
	 * all: 64 bytes after l3); past that (extension
	 * headers), by the helper. */
	__u32 o = l4off + po;
	__u16 *l4 = data + (o & 0xff);
	if (o <= 0xff && (void *)(l4 + 2) <= end) {
		pt[0] = l4[0];
		pt[1] = l4[1];
	} else if (o > 0xffff || bpf_skb_load_bytes(skb, o, pt, sizeof(pt))) {
		return 0; /* cut short: no ports (the flow key's parse will drop it if it is a pool's) */
	}
	k->sport = bpf_ntohs(pt[0]);
	k->dport = bpf_ntohs(pt[1]);
	/* TCP, UDP, SCTP without extension headers (IPv6) or fragments
	 * (IPv4): the flow key has the classifier's ports. */
	if (!ext && flow_ports(k->proto))
		k->fkey = 1;
	return 0;
}

/* pkt_flow is the flow key of a packet pkt_of parsed with k->fkey set:
 * what inner_flow reads from the same headers. */
static __always_inline void pkt_flow(const struct pool_pkt *k, struct flow *f)
{
	__builtin_memcpy(f->a, k->src, 16);
	__builtin_memcpy(f->b, k->dst, 16);
	f->proto = k->proto;
	if (flow_ports(k->proto)) {
		f->pa = k->sport;
		f->pb = k->dport;
	} else if (k->family == 6) {
		f->pa = k->label >> 16;
		f->pb = k->label & 0xffff;
	} else {
		f->pa = 0;
		f->pb = 0;
	}
}

static __always_inline int rule_matches(const struct pool_rule *r, const struct pool_pkt *k, __u32 ifindex)
{
	if (r->family != k->family)
		return 0;
	if (((k->dst[0] & r->dst_mask[0]) ^ r->dst[0]) | ((k->dst[1] & r->dst_mask[1]) ^ r->dst[1]))
		return 0;
	if (((k->src[0] & r->src_mask[0]) ^ r->src[0]) | ((k->src[1] & r->src_mask[1]) ^ r->src[1]))
		return 0;
	if (r->proto && r->proto != k->proto)
		return 0;
	if ((r->sport_lo | r->sport_hi) && (k->sport < r->sport_lo || k->sport > r->sport_hi))
		return 0;
	if ((r->dport_lo | r->dport_hi) && (k->dport < r->dport_lo || k->dport > r->dport_hi))
		return 0;
	if (r->ifindex && r->ifindex != ifindex)
		return 0;
	return 1;
}

/* pool_classify returns the index of the first rule of rs the packet
 * matches (POOL_RULES_MAX: none). Inline: no call's return thunk. */
static __always_inline int pool_classify(struct pool_ruleset *rs, struct pool_pkt *k, __u32 ifindex)
{
	if (!rs || !k)
		return POOL_RULES_MAX;
	__u32 n = rs->n;
	for (int i = 0; i < POOL_RULES_MAX; i++) {
		if (i >= n)
			break;
		if (rule_matches(&rs->r[i], k, ifindex))
			return i;
	}
	return POOL_RULES_MAX;
}

/* pool_sel's results besides a mark to set (a pool mark's top byte is
 * pool_mark_base's, so neither is one). */
#define POOL_SEL_NONE 0 /* not a pool chain's packet (or not chosen): leave it */
#define POOL_SEL_DROP 1 /* dropped, counted */
/* mark + POOL_MARK_PASS: a locally originated packet of a pool's chain
 * that is not chosen for (a probe, a pool with no slot), sent back to the
 * chain's own table by the rule plan's tables add for it (pool_local). */
#define POOL_MARK_PASS 9

/* pool_sel classifies the plain packet whose network header is at l3
 * (ifindex: the input device its rule lookup sees; 1, lo, for the host's
 * own) and makes the pool's choice: the mark to set, or POOL_SEL_*. For a
 * pool chain's packet not chosen for, *pass is its chain's pass mark.
 * One body for pool_in and pool_local (inlined in each: no call's return
 * thunk). */
static __always_inline __u32 pool_sel(struct __sk_buff *skb, __u32 l3, __u32 ifindex, int local, __u32 *pass)
{
	__u32 zero = 0, *sel = bpf_map_lookup_elem(&pool_rsel, &zero);
	struct pool_pkt k = {};
	__u8 nh = 0;

	if (!sel)
		return POOL_SEL_NONE;
	__u32 set = *sel & 1;
	struct pool_ruleset *rs = bpf_map_lookup_elem(&pool_rules, &set);
	if (!rs || !rs->n)
		return POOL_SEL_NONE;
	/* The IP header and the ports (IPv4 with options: 60 + 4). */
	linear(skb, l3 + 64);
	if (pkt_of(skb, &k, &nh, l3))
		return POOL_SEL_NONE;
	int ri = pool_classify(rs, &k, ifindex);
	if (ri < 0 || ri >= POOL_RULES_MAX)
		return POOL_SEL_NONE;
	struct pool_rule *r = &rs->r[ri];
	if (r->pool == POOL_RULE_NONE)
		return POOL_SEL_NONE; /* another chain's packet (or none's) */
	__u32 id = r->pool, mark = r->mark, rflags = r->flags;
	*pass = mark + POOL_MARK_PASS;
	/* The health checker's probes name their instance: not chosen for. */
	if (local && pool_probe_mark && skb->mark == pool_probe_mark)
		return POOL_SEL_NONE;
	struct pool_conf *c = bpf_map_lookup_elem(&pool_confs, &id);
	struct pool_stats *st = bpf_map_lookup_elem(&pool_counters, &id);
	__u32 *lv = bpf_map_lookup_elem(&pool_live, &id);
	if (!c || !st || !lv)
		return POOL_SEL_NONE;
	__u32 live = *lv, sym = !!(c->flags & POOL_SYMMETRIC);
	__u64 h = 0;
	if (k.fkey) {
		/* Parsed once: the classifier's fields are the flow key. */
		struct flow f;
		pkt_flow(&k, &f);
		h = flow_hash_cached(&f, sym);
	} else if (flow_of_inl(skb, l3, nh, sym, &h)) {
		st->errors++;
		count_drop(id, POOL_DROP_MALFORMED);
		return POOL_SEL_DROP;
	}
	int d = pool_decide(id, c, st, live, h, 1);
	if (d == POOL_DEC_PASS)
		return POOL_SEL_NONE;
	if (d == POOL_DEC_DROP)
		return POOL_SEL_DROP;
	if (d == POOL_DEC_BYPASS) {
		if (rflags & POOL_RULE_NOBYPASS) {
			st->errors++;
			count_drop(id, POOL_DROP_BYPASS_LAST);
			return POOL_SEL_DROP;
		}
		st->bypass++;
		return mark + POOL_MARK_BYPASS;
	}
	return mark + (__u32)d;
}

SEC("tcx/ingress")
int pool_in(struct __sk_buff *skb)
{
	__u32 pass = 0;

	/* Only what the stack will route: a frame for another host, or
	 * tagged with a VLAN this device is not (the core receive path drops
	 * it after tc: PACKET_OTHERHOST), is not chosen for nor counted.
	 * A priority tag (VID 0) is cleared and routed as untagged. */
	if (skb->pkt_type != 0 /* PACKET_HOST */ || (skb->vlan_present && (skb->vlan_tci & 0x0fff)))
		return POOL_TCX_NEXT;
	__u32 m = pool_sel(skb, ETH_LEN, skb->ifindex, 0, &pass);
	if (m == POOL_SEL_DROP)
		return TC_ACT_SHOT;
	if (m != POOL_SEL_NONE)
		skb->mark = m;
	return POOL_TCX_NEXT;
}

/* pool_local chooses for the headend's own packets (docs/pools.md
 * "Locally originated packets"): an lwt xmit program on the route of a
 * table only they reach (the rule "iif lo fwmark 0/0xff000000 <the
 * chain's selectors>", one priority before the chain's own). It makes
 * pool_in's choice on the plain packet (network header at 0, input
 * device lo) and asks the kernel to route it again with the mark set:
 * rules "iif lo fwmark M lookup M" send it into the instance's table,
 * whose route pushes the instance's SID list, as for forwarded packets.
 * Forwarded packets never reach it, so no program runs on egress. A
 * packet no pool rule matches here (the kernel's rule matched it by the
 * socket's ports, the packet shows none: an IPv6 fragment of a chain
 * matching ports) is dropped and counted as malformed under pool 0. */
SEC("lwt_xmit")
int pool_local(struct __sk_buff *skb)
{
	__u32 pass = 0;
	__u32 m = pool_sel(skb, 0, 1 /* LOOPBACK_IFINDEX */, 1, &pass);

	if (m == POOL_SEL_DROP)
		return BPF_DROP;
	if (m == POOL_SEL_NONE) {
		if (!pass) {
			__u32 id = 0;
			struct pool_stats *st = bpf_map_lookup_elem(&pool_counters, &id);
			if (st)
				st->errors++;
			count_drop(id, POOL_DROP_MALFORMED);
			return BPF_DROP;
		}
		m = pass;
	}
	skb->mark = m;
	return BPF_LWT_REROUTE;
}

char _license[] SEC("license") = "Dual BSD/GPL";

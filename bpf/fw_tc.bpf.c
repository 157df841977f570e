// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain SR-aware firewall (End.AN.FW, after SERA) as one tc ingress
 * program, attached with TCX to every interface of the node.
 *
 * A packet whose IPv6 DA falls in a firewall SID prefix (fw_sids, LPM) is
 * parsed once into the fields the rules match (struct fw_pkt), classified
 * and acted upon: End (go-next), skip-next, go-last, eval-args, drop or
 * reject, then forwarded by FIB lookup. Everything else returns
 * TC_ACT_UNSPEC (TCX_NEXT) so the next TCX program (the SR proxies) runs.
 *
 * Classification is the Linear Bit Vector Search of bpf-iptables with a
 * two-level bitmap: for every field some rule of the instance uses, one
 * lookup (LPM trie for addresses and 16-bit values, array for bytes) gives
 * the bitmap of the rules that field admits. The first set bit of the AND
 * of all bitmaps is the first matching rule. A summary word per bitmap
 * (which 64-bit words are non-zero) limits the AND to candidate words, so
 * the cost depends on the number of fields, not of rules.
 *
 * Rule sets are double-buffered: every instance has two table slots; the
 * control plane writes the inactive one, then flips fw_sids' slot with one
 * map update, so a packet sees either the old or the new rule set. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "lib/csid.h"

#include "lib/cursor.h"
#include "lib/ipv6.h"
#include "lib/drop.h"
#include "lib/icmp6.h"

#define FW_MAX_RULES 4096			/* rules per instance */
#define FW_WORDS (FW_MAX_RULES / 64)		/* 64: one summary word covers them */
#define FW_MAX_INSTANCES 16			/* firewall SIDs per node */
#define FW_MAX_TABLES (FW_MAX_INSTANCES * 2)	/* two slots per instance */
#define FW_MAX_BITMAPS 16384			/* bitmap pool shared by all tables */
#define FW_LPM_MAX 262144			/* address prefixes, all tables */
#define FW_MAX_BLOCKS 4096			/* 256-entry blocks of 16-bit fields, all tables */
#define FW_DIRECT 0x80000000U			/* fw_arr16: a bitmap index, not a block */
#define FW_ARGS_MAX 4096			/* eval-args table entries, all tables */
#define FW_NVAL8 256
#define FW_LINEAR_MAX 4096			/* offsets read from the linear data directly */

#ifndef TC_ACT_UNSPEC
#define TC_ACT_UNSPEC (-1)
#endif

/* The fields a rule can match. Addresses are looked up in fw_lpm, 16-bit
 * values in fw_arr16 (high byte) then fw_blocks (low byte), bytes in
 * fw_arr8. */
enum fw_field {
	FW_F_SRC,     /* original source (basic -s, --inner-src) */
	FW_F_DST,     /* original destination (basic -d, --inner-dst) */
	FW_F_OSRC,    /* outer source (-m srh -s) */
	FW_F_ODST,    /* outer destination (-m srh -d) */
	FW_F_PSID,    /* Segment List[SL+1] */
	FW_F_NSID,    /* Segment List[SL-1] */
	FW_F_LSID,    /* Segment List[0] */
	FW_F_SPORT,   /* 16-bit fields (LPM over range expansions) */
	FW_F_DPORT,
	FW_F_ICMP,    /* type << 8 | code */
	FW_F_TAG,
	FW_F_PROTO,   /* 8-bit fields (arrays) */
	FW_F_NEXTHDR,
	FW_F_HDRLEN,
	FW_F_SEGS,
	FW_F_LAST,
	FW_F_MAX,
};

#define FW_F_FIRST16 FW_F_SPORT
#define FW_F_FIRST8 FW_F_PROTO
#define FW_N16 (FW_F_FIRST8 - FW_F_FIRST16)
#define FW_N8 (FW_F_MAX - FW_F_FIRST8)

/* What a rule, the policy or an ARGS value does. 0..3 are also the default
 * eval-args table (ARGS value = action). */
enum fw_action {
	FW_ACT_GO_NEXT = 0,
	FW_ACT_DROP = 1,
	FW_ACT_SKIP_NEXT = 2,
	FW_ACT_GO_LAST = 3,
	FW_ACT_EVAL_ARGS = 4,
	FW_ACT_REJECT = 5,
};

enum fw_drop_reason {
	FW_DROP_TRUNCATED, /* "truncated" */
	FW_DROP_BAD_SRH,	/* "bad-srh": wrong routing type, bad hdr-len, SL > last entry */
	FW_DROP_BAD_EXT,	/* "too-many-ext-hdrs": too many extension headers */
	FW_DROP_FRAGMENT, /* "fragment" */
	FW_DROP_BAD_INNER,	/* "bad-inner": the inner header is not what the SRH says */
	FW_DROP_HOP_LIMIT, /* "hop-limit" */
	FW_DROP_RULE,		/* "rule": a DROP rule */
	FW_DROP_REJECT,		/* "reject": a REJECT rule (after the ICMP error, if any) */
	FW_DROP_POLICY,		/* "policy": no rule matched, policy drop */
	FW_DROP_ARGS,		/* "unknown-args": eval-args: the ARGS value has no action */
	FW_DROP_INTERNAL, /* "internal" */
	FW_DROP_MAX,
};

/* Value of fw_sids: the instance and its active table slot. */
struct fw_inst {
	__u32 id;
	__u32 slot;
	/* A uSID instance (RFC 9800 F3216: 32/16): go-next shifts the
	 * container (lib/csid.h); 0/0 for a full SID. */
	__u8 csid_lblen;
	__u8 csid_nflen;
	__u16 pad;
};

struct fw_sid_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* One compiled rule set (fw_tables[id * 2 + slot]). Bitmap indexes point
 * into fw_bitmaps. */
struct fw_table {
	__u32 nrules;
	__u32 used;		/* bit f: some rule matches field f */
	__u32 meta[4];		/* rules admitted by (family IPv4 ? 1 : 0) | (has SRH ? 2 : 0) */
	__u32 absent[FW_F_MAX]; /* rules admitted when the packet lacks the field (or it is unused) */
	__u8 policy;		/* FW_ACT_GO_NEXT or FW_ACT_DROP */
	__u8 args_bits;		/* rightmost bits of the DA that are ARGS (0..32) */
	__u8 _pad[2];
	__u32 bm_base;		/* control plane bookkeeping: this table's bitmaps are */
	__u32 bm_count;		/* fw_bitmaps[bm_base, bm_base + bm_count) */
	__u32 bk_base;		/* ... and its blocks fw_blocks[bk_base * 256, ...) */
	__u32 bk_count;
};

struct fw_rule {
	__u8 action;
	__u8 icmp_code; /* REJECT: ICMPv6 Destination Unreachable code */
	__u8 _pad[2];
};

struct fw_bitmap {
	__u64 summary;	/* bit w: words[w] != 0 */
	__u64 words[FW_WORDS];
};

/* Key of fw_lpm: prefixlen counts the 16 bits of table + field, then the
 * address prefix's bits. */
struct fw_lpm_key {
	__u32 prefixlen;
	__u8 table;
	__u8 field;
	__u8 data[16];
};

struct fw_args_key {
	__u32 table;
	__u32 value;
};

struct fw_stats {
	__u64 packets; /* handled (addressed to the instance) */
	__u64 bytes;
	__u64 forwarded;   /* End/skip-next/go-last applied and sent on */
	__u64 delivered;   /* accepted without a next segment: handed to the stack */
	__u64 go_next;
	__u64 skip_next;
	__u64 go_last;
	__u64 policy;      /* no rule matched */
	__u64 icmp_sent;
	__u64 icmp_limited; /* ICMP errors suppressed by the rate limit */
	__u64 drops[FW_DROP_MAX];
};

struct fw_counter {
	__u64 packets;
	__u64 bytes;
};

struct fw_ratelimit {
	struct bpf_spin_lock lock;
	__u32 _pad;
	__u64 last_ns;
	__u64 tokens;
};

/* Referenced so their BTF is emitted for bpf2go -type (never written). */
const enum fw_field *unused_field __attribute__((unused));
const enum fw_action *unused_action __attribute__((unused));
const enum fw_drop_reason *unused_drop_reason __attribute__((unused));

/* ICMP errors per instance: a token bucket of icmp_burst refilled at
 * icmp_rate per second. */
const volatile __u64 icmp_rate = 100;
const volatile __u64 icmp_burst = 20;

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FW_MAX_INSTANCES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fw_sid_key);
	__type(value, struct fw_inst);
} fw_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct fw_table);
} fw_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_TABLES * FW_MAX_RULES);
	__type(key, __u32);
	__type(value, struct fw_rule);
} fw_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_BITMAPS);
	__type(key, __u32);
	__type(value, struct fw_bitmap);
} fw_bitmaps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FW_LPM_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fw_lpm_key);
	__type(value, __u32);
} fw_lpm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_TABLES * FW_N8 * FW_NVAL8);
	__type(key, __u32);
	__type(value, __u32);
} fw_arr8 SEC(".maps");

/* 16-bit fields, two levels (an LPM trie over range expansions costs a
 * walk of up to 16 nodes): fw_arr16[(table * FW_N16 + field) * 256 + high
 * byte] is FW_DIRECT | bitmap when the whole 256-value block admits the
 * same rules, else a block number b: fw_blocks[b * 256 + low byte]. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_TABLES * FW_N16 * FW_NVAL8);
	__type(key, __u32);
	__type(value, __u32);
} fw_arr16 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_BLOCKS * FW_NVAL8);
	__type(key, __u32);
	__type(value, __u32);
} fw_blocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_ARGS_MAX);
	__type(key, struct fw_args_key);
	__type(value, __u32);
} fw_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_MAX_INSTANCES);
	__type(key, __u32);
	__type(value, struct fw_stats);
} fw_stats_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_MAX_TABLES * FW_MAX_RULES);
	__type(key, __u32);
	__type(value, struct fw_counter);
} fw_rule_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_MAX_INSTANCES);
	__type(key, __u32);
	__type(value, struct fw_ratelimit);
} fw_ratelimit_map SEC(".maps");

/* What the classifier sees of one packet (fwrule.Packet). */
struct fw_pkt {
	struct in6_addr src, dst;   /* original; IPv4 as v4-mapped */
	struct in6_addr osrc, odst; /* outer header as received */
	struct in6_addr psid, nsid, lsid;
	__u16 sport, dport, icmp, tag;
	__u8 v4, has_srh, has_ports, has_icmp, has_psid, has_nsid;
	__u8 proto, nexthdr, hdrlen, segs, last;
};

/* Per-CPU scratch: too big for the 512-byte stack. */
struct fw_scratch {
	__u8 buf[CSUM_CHUNK];
	struct fw_pkt p;
	struct fw_lpm_key k;
	__u32 bm[FW_F_MAX + 1]; /* the packet's bitmap per field, meta last */
	/* Where rd() puts what it reads: map memory, not the stack, so that
	 * its two paths (copy, helper) leave the verifier the same state. */
	union {
		__u8 b[40];
		struct ipv6hdr ip6;
		struct iphdr ip4;
		struct ipv6_sr_hdr srh;
		struct in6_addr a;
	} t;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_scratch);
} fw_scratch_map SEC(".maps");


static __always_inline int drop(struct fw_stats *st, __u32 reason)
{
	count_drop(st, reason, FW_DROP_MAX);
	return TC_ACT_SHOT;
}

/* ctz64: index of the lowest set bit of a non-zero x (BPF has no ctz):
 * the population count of the bits below it. Branch-free on purpose: with
 * one branch per bit the verifier tracks every possible index as its own
 * state and gives up (1M instructions). */
static __always_inline __u32 ctz64(__u64 x)
{
	__u64 v = (x & -x) - 1;

	v = v - ((v >> 1) & 0x5555555555555555ULL);
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (__u32)((v * 0x0101010101010101ULL) >> 56);
}

static __always_inline void v4mapped(struct in6_addr *a, __be32 v4)
{
	a->in6_u.u6_addr32[0] = 0;
	a->in6_u.u6_addr32[1] = 0;
	a->in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	a->in6_u.u6_addr32[3] = v4;
}

/* rd_t copies len (1..40) bytes at offset off of the packet into sc->t:
 * straight from the linear data when they are there (a
 * bpf_skb_load_bytes costs tens of ns), else through the helper. A global
 * function: the verifier checks it once, and its callers see one unknown
 * result instead of a copy path and a helper path each (which multiplied
 * the parser's states beyond the verifier's limit). */
__noinline int rd_t(struct __sk_buff *skb, struct fw_scratch *sc, __u32 off, __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u64 o = off;

	if (!sc || len < 1 || len > sizeof(sc->t))
		return -1;
	barrier_var(o);
	if (o < FW_LINEAR_MAX) {
		const __u8 *h = data + o;

		if ((void *)(h + sizeof(sc->t)) <= end) {
			switch (len) {
			case 1:
				__builtin_memcpy(sc->t.b, h, 1);
				return 0;
			case 2:
				__builtin_memcpy(sc->t.b, h, 2);
				return 0;
			case 4:
				__builtin_memcpy(sc->t.b, h, 4);
				return 0;
			case 8:
				__builtin_memcpy(sc->t.b, h, 8);
				return 0;
			case 16:
				__builtin_memcpy(sc->t.b, h, 16);
				return 0;
			case 20:
				__builtin_memcpy(sc->t.b, h, 20);
				return 0;
			case 40:
				__builtin_memcpy(sc->t.b, h, 40);
				return 0;
			}
		}
	}
	{
		__u64 n = len;

		barrier_var(n); /* the bound checked is the one the helper gets */
		if (n < 1 || n > sizeof(sc->t))
			return -1;
		return bpf_skb_load_bytes(skb, off, sc->t.b, n);
	}
}

/* rd reads len bytes at off into dst, which must be sc->t. */
#define rd(skb, sc, off, dst, len) rd_t(skb, sc, off, len)

/* upper reads ports / ICMP type+code of the original packet's upper-layer
 * header (protocol p->proto) at off; lim is the end of that packet. A
 * header too short for them is truncated (fwrule.Extract's rule). */
static __always_inline int upper(struct __sk_buff *skb, struct fw_scratch *sc, struct fw_pkt *p,
				 __u32 off, __u32 lim)
{
	__u8 *b = sc->t.b;
	int icmp = (!p->v4 && p->proto == IPPROTO_ICMPV6) || (p->v4 && p->proto == IPPROTO_ICMP);
	int ports = p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP ||
		    p->proto == IPPROTO_SCTP || p->proto == IPPROTO_UDPLITE;

	if (!icmp && !ports)
		return -1;
	if (off + 4 > lim || rd(skb, sc, off, b, 4) < 0)
		return FW_DROP_TRUNCATED;
	if (icmp) {
		p->has_icmp = 1;
		p->icmp = (__u16)b[0] << 8 | b[1];
	} else {
		p->has_ports = 1;
		p->sport = (__u16)b[0] << 8 | b[1];
		p->dport = (__u16)b[2] << 8 | b[3];
	}
	return -1;
}

/* Flags of ext_step / ext_walk. */
#define FW_EXT_STOP_RH 1 /* stop at a routing header (the outer chain's SRH) */
#define FW_EXT_INNER 2	 /* the original packet's chain: fragments allowed */

/* ext_step takes one step of an extension-header walk (lib/ipv6.h says
 * which headers and how long): -1 at the upper layer (or at a routing
 * header with FW_EXT_STOP_RH), -2 after stepping over a header, else a
 * drop reason. n is the number of headers already stepped over.
 * Fragments: in the outer chain they are malformed input (DESIGN 3.4: a
 * non-first fragment would hide the ports the rules match); in the inner
 * chain a first fragment is stepped over and a non-first one ends the
 * walk with *frag set and *nh its next header. Reads 4 bytes (the
 * fragment offset) from a header known to have 8. */
static __always_inline int ext_step(struct __sk_buff *skb, struct fw_scratch *sc, __u32 *off,
				    __u8 *nh, __u32 lim, int n, int flags, int *frag)
{
	__u8 *hdr = sc->t.b;
	__u32 end;

	if (!ipv6_is_ext(*nh) || ((flags & FW_EXT_STOP_RH) && *nh == IPPROTO_ROUTING))
		return -1;
	if (n >= IPV6_EXT_MAX)
		return FW_DROP_BAD_EXT;
	if (*off + 8 > lim || rd(skb, sc, *off, hdr, 4) < 0)
		return FW_DROP_TRUNCATED;
	if (*nh == IPPROTO_FRAGMENT) {
		if (!(flags & FW_EXT_INNER))
			return FW_DROP_FRAGMENT;
		if ((((__u16)hdr[2] << 8 | hdr[3]) & 0xfff8) != 0) {
			*nh = hdr[0];
			*frag = 1;
			return -1;
		}
	}
	end = *off + ipv6_ext_len(*nh, hdr[1]);
	if (end > lim)
		return FW_DROP_TRUNCATED;
	*nh = hdr[0];
	*off = end;
	return -2;
}

/* ext_walk steps over extension headers from *off (next header *nh) until
 * ext_step stops: -1 at the upper layer (see ext_step's flags), else a
 * drop reason. *n counts the headers stepped over, across the calls that
 * walk one chain: the bound IPV6_EXT_MAX is the chain's, not the call's. */
static __always_inline int ext_walk(struct __sk_buff *skb, struct fw_scratch *sc, __u32 *off,
				    __u8 *nh, __u32 lim, int *n, int flags, int *frag)
{
	int i, r = FW_DROP_BAD_EXT;

	/* A loop with a constant bound (ext_step fails at IPV6_EXT_MAX, so
	 * the last iteration never steps): the verifier sees it end. */
	for (i = *n; i <= IPV6_EXT_MAX; i++) {
		r = ext_step(skb, sc, off, nh, lim, i, flags, frag);
		if (r != -2)
			break;
	}
	*n = i;
	return r;
}

/* inner6 extracts an encapsulated IPv6 original at off (lim: end of the
 * outer packet). */
static __always_inline int inner6(struct __sk_buff *skb, struct fw_scratch *sc, struct fw_pkt *p,
				  __u32 off, __u32 lim)
{
	struct ipv6hdr *ip = &sc->t.ip6;
	__u8 nh;
	__u32 plen;
	int r, n = 0, frag = 0;

	if (off < lim) {
		if (rd(skb, sc, off, sc->t.b, 1) < 0)
			return FW_DROP_TRUNCATED;
		if (sc->t.b[0] >> 4 != 6)
			return FW_DROP_BAD_INNER;
	}
	if (off + sizeof(*ip) > lim || rd(skb, sc, off, ip, sizeof(*ip)) < 0)
		return FW_DROP_TRUNCATED;
	plen = bpf_ntohs(ip->payload_len);
	if (off + sizeof(*ip) + plen > lim)
		return FW_DROP_TRUNCATED;
	if (plen)
		lim = off + sizeof(*ip) + plen;
	p->src = ip->saddr;
	p->dst = ip->daddr;
	nh = ip->nexthdr;
	off += sizeof(*ip);
	r = ext_walk(skb, sc, &off, &nh, lim, &n, FW_EXT_INNER, &frag);
	if (r >= 0)
		return r;
	p->proto = nh;
	if (frag)
		return -1;
	return upper(skb, sc, p, off, lim);
}

static __always_inline int inner4(struct __sk_buff *skb, struct fw_scratch *sc, struct fw_pkt *p,
				  __u32 off, __u32 lim)
{
	struct iphdr *ip = &sc->t.ip4;
	__u32 ihl, tot;

	p->v4 = 1;
	if (off < lim) {
		if (rd(skb, sc, off, sc->t.b, 1) < 0)
			return FW_DROP_TRUNCATED;
		if (sc->t.b[0] >> 4 != 4)
			return FW_DROP_BAD_INNER;
	}
	if (off + sizeof(*ip) > lim || rd(skb, sc, off, ip, sizeof(*ip)) < 0)
		return FW_DROP_TRUNCATED;
	ihl = (__u32)ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return FW_DROP_BAD_INNER;
	tot = bpf_ntohs(ip->tot_len);
	if (tot < ihl || off + tot > lim)
		return FW_DROP_TRUNCATED;
	v4mapped(&p->src, ip->saddr);
	v4mapped(&p->dst, ip->daddr);
	p->proto = ip->protocol;
	if (ip->frag_off & bpf_htons(0x1fff))
		return -1; /* a non-first fragment: no ports */
	return upper(skb, sc, p, off + ihl, off + tot);
}

static __always_inline int load_sid(struct __sk_buff *skb, struct fw_scratch *sc, __u32 srh_off,
				    __u32 i, struct in6_addr *a)
{
	if (rd_t(skb, sc, srh_off + IPV6_SRH_FIXED_LEN + i * 16, 16) < 0)
		return -1;
	*a = sc->t.a;
	return 0;
}

/* lpm_index looks field f's value up: the bitmap index, or -1. */
static __always_inline __s64 lpm_index(struct fw_lpm_key *k, __u32 tid, __u32 f,
					const struct in6_addr *val)
{
	__u32 *v;

	k->prefixlen = 16 + 128;
	k->table = tid;
	k->field = f;
	__builtin_memcpy(k->data, val, 16);
	v = bpf_map_lookup_elem(&fw_lpm, k);
	if (!v)
		return -1;
	return *v;
}

static __always_inline __s64 arr16_index(__u32 tid, __u32 f, __u16 val)
{
	__u32 k = (tid * FW_N16 + (f - FW_F_FIRST16)) * FW_NVAL8 + (val >> 8);
	__u32 *v = bpf_map_lookup_elem(&fw_arr16, &k);

	if (!v)
		return -1;
	if (*v & FW_DIRECT)
		return *v & ~FW_DIRECT;
	k = *v * FW_NVAL8 + (val & 0xff);
	v = bpf_map_lookup_elem(&fw_blocks, &k);
	if (!v)
		return -1;
	return *v;
}

static __always_inline __s64 arr_index(__u32 tid, __u32 f, __u8 val)
{
	__u32 k = (tid * FW_N8 + (f - FW_F_FIRST8)) * FW_NVAL8 + val;
	__u32 *v = bpf_map_lookup_elem(&fw_arr8, &k);

	if (!v)
		return -1;
	return *v;
}

#define FW_USED(t, f) ((t)->used & (1U << (f)))
/* A fresh load of the used-fields mask for every test: a bit test on one
 * register narrows what the verifier knows of it, and with 16 tests in a
 * 64-iteration loop the combinations never prune. A new load each time
 * leaves nothing to remember. */
#define FW_USED_FRESH(t) (*(volatile const __u32 *)&(t)->used)

/* field_index: the bitmap of field f for packet p (the table's absent
 * bitmap when no rule uses f or the packet lacks it). */
static __always_inline __s64 field_index(const struct fw_table *t, __u32 tid, __u32 f,
					 const struct fw_pkt *p, struct fw_lpm_key *k)
{
	if (!FW_USED(t, f))
		return t->absent[f];
	switch (f) {
	case FW_F_SRC:
		return lpm_index(k, tid, f, &p->src);
	case FW_F_DST:
		return lpm_index(k, tid, f, &p->dst);
	case FW_F_OSRC:
		return p->has_srh ? lpm_index(k, tid, f, &p->osrc) : t->absent[f];
	case FW_F_ODST:
		return p->has_srh ? lpm_index(k, tid, f, &p->odst) : t->absent[f];
	case FW_F_PSID:
		return p->has_psid ? lpm_index(k, tid, f, &p->psid) : t->absent[f];
	case FW_F_NSID:
		return p->has_nsid ? lpm_index(k, tid, f, &p->nsid) : t->absent[f];
	case FW_F_LSID:
		return p->has_srh ? lpm_index(k, tid, f, &p->lsid) : t->absent[f];
	case FW_F_SPORT:
		return p->has_ports ? arr16_index(tid, f, p->sport) : t->absent[f];
	case FW_F_DPORT:
		return p->has_ports ? arr16_index(tid, f, p->dport) : t->absent[f];
	case FW_F_ICMP:
		return p->has_icmp ? arr16_index(tid, f, p->icmp) : t->absent[f];
	case FW_F_TAG:
		return p->has_srh ? arr16_index(tid, f, p->tag) : t->absent[f];
	case FW_F_PROTO:
		return arr_index(tid, f, p->proto);
	case FW_F_NEXTHDR:
		return p->has_srh ? arr_index(tid, f, p->nexthdr) : t->absent[f];
	case FW_F_HDRLEN:
		return p->has_srh ? arr_index(tid, f, p->hdrlen) : t->absent[f];
	case FW_F_SEGS:
		return p->has_srh ? arr_index(tid, f, p->segs) : t->absent[f];
	case FW_F_LAST:
		return p->has_srh ? arr_index(tid, f, p->last) : t->absent[f];
	}
	return -1;
}

static __always_inline const struct fw_bitmap *bitmap(__s64 idx)
{
	__u32 k = (__u32)idx;

	if (idx < 0)
		return 0;
	return bpf_map_lookup_elem(&fw_bitmaps, &k);
}

/* classify returns the index of the first matching rule, -1 for none,
 * -2 on an internal error (a missing table entry). A global function:
 * the verifier checks it once, not once per distinct state of its caller
 * (the parser's many paths), and its stack frame is separate. The bitmaps' indexes
 * are kept in the scratch map, not as pointers on the stack (the stack of
 * a call chain is limited to 512 bytes); a second array lookup is a bounds
 * check and an add. */
__noinline int classify(const struct fw_table *t, __u32 tid, const struct fw_pkt *p,
			struct fw_scratch *s)
{
	const struct fw_bitmap *b;
	__u64 cand, x;
	__s64 idx;
	__u32 w;
	int f, i;

	if (!t || !p || !s)
		return -2;
	s->bm[FW_F_MAX] = t->meta[(p->v4 ? 1 : 0) | (p->has_srh ? 2 : 0)];
	b = bitmap(s->bm[FW_F_MAX]);
	if (!b)
		return -2;
	cand = b->summary;
#pragma unroll
	for (f = 0; f < FW_F_MAX; f++) {
		/* A field no rule uses admits every rule: skip it. */
		if (!(FW_USED_FRESH(t) & (1U << f)))
			continue;
		idx = field_index(t, tid, f, p, &s->k);
		b = bitmap(idx);
		if (!b)
			return -2;
		s->bm[f] = idx;
		cand &= b->summary;
	}
	for (i = 0; i < FW_WORDS; i++) {
		if (!cand)
			break;
		w = ctz64(cand) & (FW_WORDS - 1);
		cand &= cand - 1;
		b = bitmap(s->bm[FW_F_MAX]);
		if (!b)
			return -2;
		x = b->words[w];
#pragma unroll
		for (f = 0; f < FW_F_MAX; f++) {
			if (!(FW_USED_FRESH(t) & (1U << f)))
				continue;
			b = bitmap(s->bm[f]);
			if (!b)
				return -2;
			x &= b->words[w];
		}
		if (x)
			return w * 64 + ctz64(x);
	}
	return -1;
}

static __always_inline int ratelimit_ok(__u32 id)
{
	struct fw_ratelimit *rl = bpf_map_lookup_elem(&fw_ratelimit_map, &id);
	__u64 now = bpf_ktime_get_ns(), interval, add;
	int ok = 0;

	if (!rl)
		return 0;
	interval = 1000000000ULL / (icmp_rate ? icmp_rate : 1);
	bpf_spin_lock(&rl->lock);
	add = (now - rl->last_ns) / interval;
	if (add) {
		rl->tokens += add;
		if (rl->tokens > icmp_burst)
			rl->tokens = icmp_burst;
		rl->last_ns = now;
	}
	if (rl->tokens) {
		rl->tokens--;
		ok = 1;
	}
	bpf_spin_unlock(&rl->lock);
	return ok;
}

/* icmp_error answers the packet's (outer) source with an ICMPv6 error,
 * rate-limited per instance, or drops it; either way the packet is
 * counted as a drop with reason. */
#define FW_ICMP_MSG(type, code, info, reason) \
	((__u32)(type) << 24 | (__u32)(code) << 16 | (__u32)(info) << 8 | (__u32)(reason))

/* msg packs type, code, info (< 256) and drop reason: BPF subprograms take
 * at most five arguments. */
static __noinline int icmp_error(struct __sk_buff *skb, struct fw_stats *st, __u32 id,
				 struct fw_scratch *s, __u32 msg)
{
	__u8 type = msg >> 24, code = msg >> 16;
	__u32 info = (msg >> 8) & 0xff, reason = msg & 0xff;
	int oif;

	count_drop(st, reason, FW_DROP_MAX);
	if (!ratelimit_ok(id)) {
		if (st)
			st->icmp_limited++;
		return TC_ACT_SHOT;
	}
	oif = icmp6_error(skb, type, code, info, s->buf);
	if (oif <= 0)
		return TC_ACT_SHOT;
	if (st)
		st->icmp_sent++;
	return bpf_redirect(oif, 0);
}

/* segment applies an SRv6 action that moves to Segment List[sl]: DA <-
 * SegList[sl], SL <- sl, then forwards by FIB (hop limit decremented) or
 * hands the packet to the stack when the FIB cannot forward it (a local
 * SID, an lwt route ...). */
static __always_inline int forward_da(struct __sk_buff *skb, struct fw_stats *st, __u32 srh_off,
				      __u8 sl, __u8 hop, const struct in6_addr *src, const struct in6_addr *da);

static __always_inline int segment(struct __sk_buff *skb, struct fw_scratch *sc, struct fw_stats *st, __u32 srh_off,
				   __u8 sl, __u8 hop, const struct in6_addr *src)
{
	struct in6_addr da;

	if (load_sid(skb, sc, srh_off, sl, &da) < 0)
		return drop(st, FW_DROP_TRUNCATED);
	return forward_da(skb, st, srh_off, sl, hop, src, &da);
}

/* forward_da writes DA (and SL when srh_off is set: a shifted uSID
 * container keeps SL and may have no SRH) and forwards. */
static __always_inline int forward_da(struct __sk_buff *skb, struct fw_stats *st, __u32 srh_off,
				      __u8 sl, __u8 hop, const struct in6_addr *src, const struct in6_addr *da)
{
	struct bpf_fib_lookup f = {};
	int rc;

	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = skb->len - ETH_HLEN;
	__builtin_memcpy(f.ipv6_src, src, 16);
	__builtin_memcpy(f.ipv6_dst, da, 16);
	rc = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		/* We forward: the hop limit is ours to decrement. */
		if (hop <= 1)
			return drop(st, FW_DROP_HOP_LIMIT);
		hop--;
	} else {
		rc = -1; /* the stack decides (and answers a too-big packet) */
	}
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, daddr), da, sizeof(*da),
				BPF_F_RECOMPUTE_CSUM) < 0 ||
	    (srh_off && bpf_skb_store_bytes(skb, srh_off + offsetof(struct ipv6_sr_hdr, segments_left), &sl, 1,
					    BPF_F_RECOMPUTE_CSUM) < 0) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, hop_limit), &hop, 1,
				BPF_F_RECOMPUTE_CSUM) < 0)
		return drop(st, FW_DROP_INTERNAL);
	if (st)
		st->forwarded++;
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (bpf_skb_store_bytes(skb, 0, f.dmac, ETH_ALEN, 0) < 0 ||
		    bpf_skb_store_bytes(skb, ETH_ALEN, f.smac, ETH_ALEN, 0) < 0)
			return drop(st, FW_DROP_INTERNAL);
		return bpf_redirect(f.ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(f.ifindex, 0, 0, 0);
	return TC_ACT_OK;
}

/* What the parse stage leaves to the act stage besides struct fw_pkt. */
struct fw_parsed {
	__u32 srh_off; /* offset of the SRH (with p->has_srh) */
	__u8 sl;       /* its Segments Left */
	__u8 hop;      /* the outer Hop Limit */
	__u8 csid_lblen, csid_nflen; /* the instance's uSID format (fw_inst) */
};

/* fw_parse is the parse stage: it reads the packet once into sc->p (the
 * fields the rules match, struct fw_pkt) and o. It returns -1, or the drop
 * reason of a malformed packet. ip6 is the outer header, already checked to
 * be in the linear data. */
static __always_inline int fw_parse(struct __sk_buff *skb, struct fw_scratch *sc,
				    const struct fw_table *t, const struct ipv6hdr *ip6,
				    struct fw_parsed *o)
{
	struct fw_pkt *p = &sc->p;
	struct ipv6_sr_hdr srh;
	__u32 lim, plen, off, end;
	int r, nexts = 0, frag = 0;
	__u8 nh;

	__builtin_memset(p, 0, sizeof(*p));
	o->hop = ip6->hop_limit;
	p->osrc = ip6->saddr;
	p->odst = ip6->daddr;
	p->src = p->osrc;
	p->dst = p->odst;
	/* Bytes past the payload length are not the packet's (Ethernet
	 * padding); a payload length past the end is a truncation. */
	lim = skb->len;
	plen = bpf_ntohs(ip6->payload_len);
	if (plen) {
		if (ETH_HLEN + sizeof(struct ipv6hdr) + plen > lim)
			return FW_DROP_TRUNCATED;
		lim = ETH_HLEN + sizeof(struct ipv6hdr) + plen;
	}
	off = ETH_HLEN + sizeof(struct ipv6hdr);
	nh = ip6->nexthdr;

	/* Outer extension headers up to the first routing header, which must
	 * be an SRH. */
	r = ext_walk(skb, sc, &off, &nh, lim, &nexts, FW_EXT_STOP_RH, &frag);
	if (r >= 0)
		return r;
	if (nh == IPPROTO_ROUTING) {
		if (nexts >= IPV6_EXT_MAX)
			return FW_DROP_BAD_EXT;
		nexts++;
		if (off + IPV6_SRH_FIXED_LEN > lim ||
		    rd(skb, sc, off, &sc->t.srh, sizeof(sc->t.srh)) < 0)
			return FW_DROP_TRUNCATED;
		srh = sc->t.srh;
		end = off + ipv6_ext_len(IPPROTO_ROUTING, srh.hdrlen);
		if (end > lim)
			return FW_DROP_TRUNCATED;
		if (!ipv6_srh_valid(&srh))
			return FW_DROP_BAD_SRH;
		o->srh_off = off;
		o->sl = srh.segments_left;
		p->has_srh = 1;
		p->nexthdr = srh.nexthdr;
		p->hdrlen = srh.hdrlen;
		p->segs = srh.segments_left;
		p->last = srh.first_segment;
		p->tag = bpf_ntohs(srh.tag);
		/* Segment List[0]: matched by --srh-lsid, and the original
		 * destination in insert mode. */
		if ((FW_USED(t, FW_F_LSID) || FW_USED(t, FW_F_DST)) &&
		    load_sid(skb, sc, off, 0, &p->lsid) < 0)
			return FW_DROP_TRUNCATED;
		if (FW_USED(t, FW_F_PSID) && o->sl < srh.first_segment) {
			if (load_sid(skb, sc, off, (__u32)o->sl + 1, &p->psid) < 0)
				return FW_DROP_TRUNCATED;
			p->has_psid = 1;
		}
		if (FW_USED(t, FW_F_NSID) && o->sl > 0) {
			if (load_sid(skb, sc, off, (__u32)o->sl - 1, &p->nsid) < 0)
				return FW_DROP_TRUNCATED;
			p->has_nsid = 1;
		}
		off = end;
		nh = srh.nexthdr;
		/* Encapsulation: the original packet is the inner one. */
		if (nh == IPPROTO_IPV6)
			return inner6(skb, sc, p, off, lim);
		if (nh == IPPROTO_IPIP)
			return inner4(skb, sc, p, off, lim);
		p->dst = p->lsid; /* insert mode: the final destination */
	} else if (nh == IPPROTO_IPV6) {
		/* Reduced encapsulation without an SRH (one segment, or a
		 * whole uSID chain in the DA): the original is inner too. */
		return inner6(skb, sc, p, off, lim);
	} else if (nh == IPPROTO_IPIP) {
		return inner4(skb, sc, p, off, lim);
	}
	/* Plain or insert mode: the upper layer after the remaining extension
	 * headers (the chain's bound counts them all). */
	r = ext_walk(skb, sc, &off, &nh, lim, &nexts, 0, &frag);
	if (r >= 0)
		return r;
	p->proto = nh;
	return upper(skb, sc, p, off, lim);
}

/* What the classify stage decided. */
struct fw_verdict {
	int idx;     /* the matching rule, -1: none (the policy applies) */
	__u8 action; /* enum fw_action */
	__u8 code;   /* REJECT: ICMPv6 Destination Unreachable code */
};

/* fw_match is the classify stage: the first rule of table tid matching
 * sc->p (or the policy), counted per rule. It returns -1, or a drop
 * reason on an internal error. */
static __always_inline int fw_match(struct __sk_buff *skb, const struct fw_table *t, __u32 tid,
				    struct fw_scratch *sc, struct fw_stats *st,
				    struct fw_verdict *v)
{
	struct fw_counter *rc;
	struct fw_rule *rule;
	__u32 key;

	v->code = 0;
	v->idx = classify(t, tid, &sc->p, sc);
	if (v->idx == -2)
		return FW_DROP_INTERNAL;
	if (v->idx < 0 || (__u32)v->idx >= t->nrules) {
		v->idx = -1;
		if (st)
			st->policy++;
		v->action = t->policy;
		return -1;
	}
	key = tid * FW_MAX_RULES + (__u32)v->idx;
	rule = bpf_map_lookup_elem(&fw_rules, &key);
	if (!rule)
		return FW_DROP_INTERNAL;
	v->action = rule->action;
	v->code = rule->icmp_code;
	rc = bpf_map_lookup_elem(&fw_rule_stats, &key);
	if (rc) {
		rc->packets++;
		rc->bytes += skb->len;
	}
	return -1;
}

/* fw_act is the act stage: resolve eval-args, then drop, reject, deliver
 * (no next segment) or update Segments Left and forward. */
static __always_inline int fw_act(struct __sk_buff *skb, const struct fw_table *t, __u32 tid,
				  __u32 id, struct fw_stats *st, struct fw_scratch *sc,
				  const struct ipv6hdr *ip6, const struct fw_parsed *o,
				  struct fw_verdict *v)
{
	__u8 sl = o->sl;

	if (v->action == FW_ACT_EVAL_ARGS) {
		struct fw_args_key ak = { .table = tid };
		__u32 *a, bits = t->args_bits;

		if (bits) {
			ak.value = bpf_ntohl(ip6->daddr.in6_u.u6_addr32[3]);
			if (bits < 32)
				ak.value &= (1U << bits) - 1;
		}
		a = bpf_map_lookup_elem(&fw_args, &ak);
		if (!a || *a == FW_ACT_EVAL_ARGS)
			/* RFC 4443 3.4: erroneous header field, pointer to the DA. */
			return icmp_error(skb, st, id, sc,
					  FW_ICMP_MSG(ICMP6_PARAM_PROB, 0, offsetof(struct ipv6hdr, daddr),
						      FW_DROP_ARGS));
		v->action = *a;
		v->code = 4; /* REJECT from an ARGS value: port unreachable */
	}

	switch (v->action) {
	case FW_ACT_DROP:
		return drop(st, v->idx < 0 ? FW_DROP_POLICY : FW_DROP_RULE);
	case FW_ACT_REJECT:
		return icmp_error(skb, st, id, sc,
				  FW_ICMP_MSG(ICMP6_DEST_UNREACH, v->code, 0, FW_DROP_REJECT));
	case FW_ACT_GO_NEXT:
	case FW_ACT_SKIP_NEXT:
	case FW_ACT_GO_LAST:
		break;
	default:
		return drop(st, FW_DROP_INTERNAL);
	}
	if (v->action == FW_ACT_GO_NEXT && o->csid_nflen) {
		/* A uSID: End with NEXT-C-SID (RFC 9800 4.1.1). While the
		 * container holds another uSID the DA shifts and SL stays;
		 * a consumed container goes on as a full SID does. */
		/* The scratch's next-SID slot holds the new DA: classification is
		 * over, and a local copy would overflow the 512-byte stack. */
		struct in6_addr *da = &sc->p.nsid;

		*da = ip6->daddr;
		if (csid_next(da, o->csid_lblen, o->csid_nflen)) {
			if (st)
				st->go_next++;
			return forward_da(skb, st, sc->p.has_srh ? o->srh_off : 0, sl, o->hop, &sc->p.osrc, da);
		}
	}
	if (!sc->p.has_srh || sl == 0) {
		/* No next segment: the packet is for this node. */
		if (st)
			st->delivered++;
		return TC_ACT_OK;
	}
	if (v->action == FW_ACT_GO_NEXT) {
		if (st)
			st->go_next++;
		sl--;
	} else if (v->action == FW_ACT_SKIP_NEXT) {
		if (st)
			st->skip_next++;
		sl = sl >= 2 ? sl - 2 : 0;
	} else {
		if (st)
			st->go_last++;
		sl = 0;
	}
	return segment(skb, sc, st, o->srh_off, sl, o->hop, &sc->p.osrc);
}

/* fw_tc finds the instance the destination addresses, then runs the three
 * stages: parse, classify, act. */
SEC("tc")
int fw_tc(struct __sk_buff *skb)
{
	struct cursor c;
	struct ipv6hdr *ip6;
	struct fw_sid_key sk = { .prefixlen = 128 };
	struct fw_inst *inst;
	struct fw_table *t;
	struct fw_stats *st;
	struct fw_scratch *sc;
	struct fw_parsed o = {};
	struct fw_verdict v;
	__u32 id, tid, zero = 0;
	int r;

	ip6 = cursor_skb_ipv6(&c, skb);
	if (!ip6 || ip6->version != 6)
		return TC_ACT_UNSPEC;
	__builtin_memcpy(sk.addr, &ip6->daddr, 16);
	inst = bpf_map_lookup_elem(&fw_sids, &sk);
	if (!inst)
		return TC_ACT_UNSPEC;
	id = inst->id;
	tid = id * 2 + (inst->slot & 1);
	if (id >= FW_MAX_INSTANCES)
		return TC_ACT_UNSPEC;
	st = bpf_map_lookup_elem(&fw_stats_map, &id);
	if (st) {
		st->packets++;
		st->bytes += skb->len;
	}
	t = bpf_map_lookup_elem(&fw_tables, &tid);
	sc = bpf_map_lookup_elem(&fw_scratch_map, &zero);
	if (!t || !sc)
		return drop(st, FW_DROP_INTERNAL);

	r = fw_parse(skb, sc, t, ip6, &o);
	if (r >= 0)
		return drop(st, r);
	o.csid_lblen = inst->csid_lblen;
	o.csid_nflen = inst->csid_nflen;
	r = fw_match(skb, t, tid, sc, st, &v);
	if (r >= 0)
		return drop(st, r);
	return fw_act(skb, t, tid, id, st, sc, ip6, &o, &v);
}

char _license[] SEC("license") = "Dual BSD/GPL";

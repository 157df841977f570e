// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain O-flag sampling (segchain trace --sample, internal/oam;
 * RFC 9259 §2.1), two programs for the duration of one sampling run:
 *
 * oam_mark, TCX egress on the chain's headend: an SRv6 packet leaving it
 * whose SRH is the chain's (its first SID, Segment List[Last Entry], and
 * its Segment List[0] are the key of oam_chains) is counted, and every
 * rate-th one gets the SRH's O-flag (flags bit 2, 0x20) and is reported
 * with a timestamp: the sampled packet's start. A chain whose SRH carries
 * an HMAC TLV is not marked, only counted: the HMAC covers the flags
 * (RFC 8754 §2.1.2.1), a marked packet would no longer match it. Nothing
 * else changes.
 *
 * oam_sampled, TCX ingress (first, anchor head) on every interface of the
 * nodes of the chain's segments, nowhere else: a packet with an SRH whose
 * O-flag is set is reported with a timestamp, where it arrived, its
 * destination and Segments Left. It reads the headers straight from the
 * packet: a packet that is not sampled costs a few loads and compares on
 * those interfaces only (session 9 had a tracing program on
 * net:netif_receive_skb, run for every packet the kernel received, in
 * every namespace: most of sampling's cost). Linux's seg6 behaviours
 * ignore the O-flag, so the marked packet is forwarded as every other.
 *
 * The chain and the rate are constants set when a run loads the programs
 * (one load per run): the marker compares the SRH with them, and no
 * packet of the headend pays a hash lookup.
 *
 * Both report the 48 bytes after the SRH (the inner header in H.Encaps,
 * the transport header in H.Insert): they do not change between hops
 * and tell the sampled packets apart, so userspace puts each packet's
 * sightings together. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#define OAM_TCX_NEXT (-1)
#define OAM_OFLAG 0x20
#define OAM_ID_LEN 48
#define OAM_SRH_MAX_LAST 15 /* longest SID list marked: 16 SIDs */

#include "lib/core_netdev.h"

struct sk_buff {
	struct net_device *dev;
} __attribute__((preserve_access_index));

/* The kernel's sk_buff of a TC program's context (a trusted pointer; the
 * verifier inlines the call). */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

#include "lib/oam_events.h"

/* The sampled chain's SRH as it leaves the headend: Segment List[Last
 * Entry] (its first SID) and Segment List[0] (all zero for H.Insert: the
 * packet's own destination, not compared), and the rate (mark 1 packet in
 * oam_rate; 0: mark none). Set by the loader. */
volatile const __u64 oam_first[2];
volatile const __u64 oam_last[2];
volatile const __u32 oam_rate;

/* has_hmac walks the SRH's TLVs (off: the first, end: the SRH's end). */
static __always_inline int has_hmac(struct __sk_buff *skb, __u32 off, __u32 end)
{
	int i;

	for (i = 0; i < 4 && off + 2 <= end; i++) {
		__u8 t[2];

		if (bpf_skb_load_bytes(skb, off, t, 2) < 0)
			return 0;
		if (t[0] == 5)	/* HMAC */
			return 1;
		off += t[0] == 0 ? 1 : 2 + t[1];	/* Pad1 is one byte */
	}
	return 0;
}

/* load reads n bytes at off: straight from the linear data when they are
 * there (no helper call: the common case, a headend's own headers),
 * else through bpf_skb_load_bytes. */
static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, __u32 n)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;

	if (off <= 256 + 8 + 16 * (OAM_SRH_MAX_LAST + 1) && data + off + n <= data_end) {
		__builtin_memcpy(to, data + off, n);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, to, n);
}

SEC("tcx/egress")
int oam_mark(struct __sk_buff *skb)
{
	struct oam_sample_event ev = {};
	struct oam_chain_val *v;
	struct srh_fixed srh;
	__u32 srh_off = ETH_HLEN + sizeof(struct ipv6hdr), end, tlv, zero = 0;
	__u64 n, sid[2];
	__u8 f, nh;

	/* Every packet leaving the headend comes here: the cheapest tests
	 * first (IPv6, Next Header routing: one byte read, no helper call),
	 * then the SRH against the chain's constants, the outer header's
	 * destination only for a packet marked. */
	if (skb->protocol != bpf_htons(ETH_P_IPV6) || !oam_rate)
		return OAM_TCX_NEXT;
	if (load(skb, ETH_HLEN + 6, &nh, 1) < 0 || nh != IPPROTO_ROUTING)
		return OAM_TCX_NEXT;
	if (load(skb, srh_off, &srh, sizeof(srh)) < 0 || srh.type != 4 || srh.last > OAM_SRH_MAX_LAST)
		return OAM_TCX_NEXT;
	if (oam_last[0] | oam_last[1]) {
		if (load(skb, srh_off + 8, sid, 16) < 0 || sid[0] != oam_last[0] || sid[1] != oam_last[1])
			return OAM_TCX_NEXT;
	}
	if (load(skb, srh_off + 8 + 16 * (__u32)(srh.last & OAM_SRH_MAX_LAST), sid, 16) < 0 ||
	    sid[0] != oam_first[0] || sid[1] != oam_first[1])
		return OAM_TCX_NEXT;
	v = bpf_map_lookup_elem(&oam_chains, &zero);
	if (!v)
		return OAM_TCX_NEXT;
	end = srh_off + ((__u32)srh.hdrlen + 1) * 8;
	tlv = srh_off + 8 + 16 * ((__u32)srh.last + 1);
	if (tlv < end && has_hmac(skb, tlv, end)) {
		__sync_fetch_and_add(&v->hmac, 1);
		return OAM_TCX_NEXT;
	}
	n = __sync_fetch_and_add(&v->seen, 1);
	if (n % oam_rate)
		return OAM_TCX_NEXT;
	f = srh.flags | OAM_OFLAG;
	if (bpf_skb_store_bytes(skb, srh_off + 5, &f, 1, 0) < 0)
		return OAM_TCX_NEXT;
	__sync_fetch_and_add(&v->marked, 1);
	ev.ts = bpf_ktime_get_ns();
	ev.ifindex = skb->ifindex;
	bpf_skb_load_bytes(skb, ETH_HLEN + 24, ev.da, 16);
	bpf_skb_load_bytes(skb, end, ev.id, OAM_ID_LEN);	/* a shorter packet: zeros */
	ev.sl = srh.sl;
	ev.kind = 1;
	ev.chain = 1;
	bpf_ringbuf_output(&oam_sample_events, &ev, sizeof(ev), 0);
	return OAM_TCX_NEXT;
}

SEC("tcx/ingress")
int oam_sampled(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	struct srh_fixed *srh = (void *)(ip6 + 1);
	struct oam_sample_event ev = {};
	struct sk_buff *kskb;

	/* Every packet arriving on the chain's interfaces comes here: the
	 * fixed headers straight from the packet (an SRH right after the
	 * IPv6 header, its O-flag); nothing else for one not sampled. */
	if ((void *)(srh + 1) > data_end || skb->protocol != bpf_htons(ETH_P_IPV6) ||
	    ip6->nexthdr != IPPROTO_ROUTING || srh->type != 4 || !(srh->flags & OAM_OFLAG))
		return OAM_TCX_NEXT;
	kskb = bpf_cast_to_kern_ctx(skb);
	ev.ts = bpf_ktime_get_ns();
	ev.netns = BPF_CORE_READ(kskb, dev, nd_net.net, ns.inum);
	ev.ifindex = skb->ifindex;
	__builtin_memcpy(ev.da, &ip6->daddr, 16);
	bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(*ip6) + ((__u32)srh->hdrlen + 1) * 8, ev.id, OAM_ID_LEN);
	ev.sl = srh->sl;
	bpf_ringbuf_output(&oam_sample_events, &ev, sizeof(ev), 0);
	return OAM_TCX_NEXT;
}

char _license[] SEC("license") = "Dual BSD/GPL";

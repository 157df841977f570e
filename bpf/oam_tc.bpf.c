// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain chain trace (segchain trace, internal/oam): a TCX program
 * attached first (anchor head) on ingress of every interface of the nodes a
 * chain crosses, for the duration of one trace. It never changes
 * a packet and always returns TCX_NEXT, so the services' own programs
 * (proxies, End.AN.FW, End.AN.NF) and the stack behind them see exactly
 * what they would without it.
 *
 * A probe is an ordinary packet of the chain's flow whose transport
 * payload starts with oam_magic (random per trace). Wherever it is seen,
 * outer SRv6 (H.Encaps or H.Insert), plain inner IPv6/IPv4 between a proxy
 * and its SF, or the decapsulated packet after the egress, the program
 * finds the payload through the outer headers, the SRH and an inner
 * IPv6/IPv4 header, and records a timestamp (one clock: every lab node is a
 * namespace of this kernel), where it arrived (node, interface) and the
 * outer destination and Segments Left in a ring buffer. Arrivals only: a
 * hop's departure is the next node's arrival (a veth hands the packet over
 * in the same softirq), and every TCX attach or detach waits for an RCU
 * grace period, so halving the attach points halves a trace's setup.
 * bpf_get_netns_cookie cannot name the node: on tc it reads the socket's
 * namespace (the sender's) or init_net's. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lib/ipv6_walk.h"

#define OAM_TCX_NEXT (-1) /* TC_ACT_UNSPEC: the next TCX program decides */

volatile const __u64 oam_magic = 0;  /* the trace's probe marker */
volatile const __u32 oam_node = 0;  /* which node: one load per node */

/* oam_event is one sighting of a probe at one attach point. */
struct oam_event {
	__u64 ts;	/* bpf_ktime_get_ns */
	__u32 node;	/* oam_node of the program that saw it */
	__u32 ifindex;	/* the interface it arrived on */
	__u32 seq;	/* the probe's sequence number (payload) */
	__u8 da[16];	/* outer IPv6 destination (IPv4: first 4 bytes) */
	__u32 len;	/* skb->len */
	__u8 family;	/* 6 or 4: the outer header */
	__u8 srh;	/* 1: the packet carries an SRH */
	__u8 sl;	/* its Segments Left */
	__u8 encap;	/* 1: an inner IP packet follows the outer header */
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} oam_events SEC(".maps");

/* Referenced so that bpf2go emits the Go type of an event (-type). */
const struct oam_event *oam_event_type __attribute__((unused));

/* oam_payload is the first bytes of a probe's transport payload. */
struct oam_payload {
	__u64 magic;
	__u32 seq;
};

/* l4_payload returns the offset of the transport payload of a packet whose
 * transport header (protocol proto) is at off, or 0. */
static __always_inline __u32 l4_payload(struct __sk_buff *skb, __u32 off, __u8 proto)
{
	__u8 doff;

	switch (proto) {
	case IPPROTO_UDP:
	case IPPROTO_ICMPV6:
	case IPPROTO_ICMP:
		return off + 8;
	case IPPROTO_TCP:
		if (bpf_skb_load_bytes(skb, off + 12, &doff, 1) < 0)
			return 0;
		return off + (doff >> 4) * 4;
	}
	return 0;
}

/* ipv4_upper returns the offset after the IPv4 header at off, and its
 * protocol in *proto; 0 if there is none. */
static __always_inline __u32 ipv4_upper(struct __sk_buff *skb, __u32 off, __u8 *proto)
{
	struct iphdr ip;

	if (bpf_skb_load_bytes(skb, off, &ip, sizeof(ip)) < 0 || ip.version != 4)
		return 0;
	*proto = ip.protocol;
	return off + ip.ihl * 4;
}

static __always_inline int oam_see(struct __sk_buff *skb)
{
	struct oam_event ev = {};
	struct ipv6_walk w;
	struct oam_payload p;
	__u32 off = ETH_HLEN, pay = 0;
	__u8 proto = 0;

	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, off, &ip6, sizeof(ip6)) < 0)
			return 0;
		__builtin_memcpy(ev.da, &ip6.daddr, 16);
		ev.family = 6;
		ipv6_walk_skb(skb, skb->len, off + sizeof(ip6), ip6.nexthdr, &w);
		if (w.bad_rh || w.truncated || w.too_many || w.fragment || w.multi_srh)
			return 0;
		if (w.srh_off) {
			ev.srh = 1;
			ev.sl = w.sl;
		}
		off = w.upper_off;
		proto = w.upper;
	} else if (skb->protocol == bpf_htons(ETH_P_IP)) {
		off = ipv4_upper(skb, off, &proto);
		if (!off)
			return 0;
		ev.family = 4;
		bpf_skb_load_bytes(skb, ETH_HLEN + 16, ev.da, 4);
	} else {
		return 0;
	}
	/* One inner header: H.Encaps (IPv6 in IPv6, IPv4 in IPv6). */
	if (proto == IPPROTO_IPV6) {
		struct ipv6hdr in6;

		ev.encap = 1;
		if (bpf_skb_load_bytes(skb, off, &in6, sizeof(in6)) < 0)
			return 0;
		ipv6_walk_skb(skb, skb->len, off + sizeof(in6), in6.nexthdr, &w);
		if (w.bad_rh || w.truncated || w.too_many || w.fragment || w.multi_srh)
			return 0;
		off = w.upper_off;
		proto = w.upper;
	} else if (proto == IPPROTO_IPIP) {
		ev.encap = 1;
		off = ipv4_upper(skb, off, &proto);
		if (!off)
			return 0;
	}
	pay = l4_payload(skb, off, proto);
	if (!pay || bpf_skb_load_bytes(skb, pay, &p, sizeof(p)) < 0 || p.magic != oam_magic)
		return 0;
	ev.ts = bpf_ktime_get_ns();
	ev.node = oam_node;
	ev.ifindex = skb->ifindex;
	ev.seq = p.seq;
	ev.len = skb->len;
	bpf_ringbuf_output(&oam_events, &ev, sizeof(ev), 0);
	return 0;
}

SEC("tc")
int oam_tc(struct __sk_buff *skb)
{
	oam_see(skb);
	return OAM_TCX_NEXT;
}

char _license[] SEC("license") = "Dual BSD/GPL";

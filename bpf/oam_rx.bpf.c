// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain chain trace, the one-attach tap (internal/oam): a BTF-enabled
 * program on the net:netif_receive_skb tracepoint. It fires in
 * __netif_receive_skb_core for every packet a device receives, before
 * generic XDP and the TCX ingress programs (the proxies, End.AN.FW,
 * End.AN.NF), in every namespace of the kernel: one attach serves every
 * node of a lab, where the TCX tap needs one per interface, each waiting
 * for an RCU grace period. It only reads.
 *
 * Packets of namespaces not in oam_nodes are skipped first (the machine
 * is shared); a probe is recognised as in oam_tc.bpf.c (the transport
 * payload starts with oam_magic) through outer IPv6 + extension headers +
 * an inner IPv6/IPv4 packet, and its arrival is written to the same kind
 * of event. skb->data is the network header here (the MAC header has been
 * pulled by eth_type_trans). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

/* The kernel's types, only the fields read, relocated by CO-RE. */
#include "lib/core_netdev.h"

struct sk_buff {
	unsigned int len;
	unsigned char *data;
	unsigned char *head;
	__u16 network_header;
	struct net_device *dev;
	__be16 protocol;
} __attribute__((preserve_access_index));

#define OAM_EXT_MAX 8 /* extension headers walked per header chain */

/* The trace's probe marker: a global the loader sets before each attach
 * (not a load-time constant), so that one loaded program serves every
 * trace of a process (internal/oam keeps it loaded: the load, not the
 * attach, is what costs). */
volatile __u64 oam_magic = 0;

/* oam_rx_event is one arrival of a probe. */
struct oam_rx_event {
	__u64 ts;	/* bpf_ktime_get_ns */
	__u32 netns;	/* the receiving namespace's inode number */
	__u32 ifindex;	/* the receiving interface */
	__u32 seq;	/* the probe's sequence number (payload) */
	__u8 da[16];	/* outer IPv6 destination (IPv4: first 4 bytes) */
	__u32 len;	/* skb->len */
	__u8 family;	/* 6 or 4: the outer header */
	__u8 srh;	/* 1: the packet carries an SRH */
	__u8 sl;	/* its Segments Left */
	__u8 encap;	/* 1: an inner IP packet follows the outer header */
	__u32 reason;	/* 0: an arrival; else the kernel dropped it: enum skb_drop_reason */
	__u64 magic;	/* the marker it matched: a run still in flight when a
			 * trace released its pooled tap reports the previous
			 * trace's probe after the drain; the reader drops it */
};

const struct oam_rx_event *oam_rx_event_type __attribute__((unused));

/* oam_nodes: the namespaces (inode numbers) of the lab being traced. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} oam_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} oam_rx_events SEC(".maps");

struct oam_payload {
	__u64 magic;
	__u32 seq;
};

/* walk6 steps over the extension headers after an IPv6 header whose Next
 * Header is *nh, starting at off; it records an SRH's Segments Left. It
 * returns the offset of the upper-layer header (its protocol in *nh), or
 * 0 when the walk fails. */
static __always_inline __u32 walk6(unsigned char *data, __u32 off, __u8 *nh,
				   struct oam_rx_event *ev, int outer)
{
	int i;

	for (i = 0; i < OAM_EXT_MAX; i++) {
		__u8 h[4];

		if (*nh != IPPROTO_HOPOPTS && *nh != IPPROTO_ROUTING && *nh != IPPROTO_DSTOPTS)
			return off;
		if (bpf_probe_read_kernel(h, sizeof(h), data + off) < 0)
			return 0;
		if (outer && *nh == IPPROTO_ROUTING && h[2] == 4) {
			ev->srh = 1;
			ev->sl = h[3];
		}
		*nh = h[0];
		off += ((__u32)h[1] + 1) * 8;
	}
	return 0;
}

static __always_inline __u32 l4_payload(unsigned char *data, __u32 off, __u8 proto)
{
	__u8 doff;

	switch (proto) {
	case IPPROTO_UDP:
	case IPPROTO_ICMPV6:
	case IPPROTO_ICMP:
		return off + 8;
	case IPPROTO_TCP:
		if (bpf_probe_read_kernel(&doff, 1, data + off + 12) < 0)
			return 0;
		return off + (doff >> 4) * 4;
	}
	return 0;
}

/* oam_see reports the probe whose network header is at data, received
 * (reason 0) or dropped (reason) by skb. */
static __always_inline int oam_see(struct sk_buff *skb, unsigned char *data, __u32 inum, __u32 reason)
{
	struct oam_rx_event ev = {};
	struct oam_payload p;
	__u32 off = 0;
	__be16 proto;
	__u8 nh;

	proto = BPF_CORE_READ(skb, protocol);
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_probe_read_kernel(&ip6, sizeof(ip6), data) < 0 || ip6.version != 6)
			return 0;
		__builtin_memcpy(ev.da, &ip6.daddr, 16);
		ev.family = 6;
		nh = ip6.nexthdr;
		off = walk6(data, sizeof(ip6), &nh, &ev, 1);
	} else if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_probe_read_kernel(&ip, sizeof(ip), data) < 0 || ip.version != 4)
			return 0;
		__builtin_memcpy(ev.da, &ip.daddr, 4);
		ev.family = 4;
		nh = ip.protocol;
		off = ip.ihl * 4;
	} else {
		return 0;
	}
	if (!off)
		return 0;
	if (nh == IPPROTO_IPV6) {
		struct ipv6hdr in6;

		ev.encap = 1;
		if (bpf_probe_read_kernel(&in6, sizeof(in6), data + off) < 0)
			return 0;
		nh = in6.nexthdr;
		off = walk6(data, off + sizeof(in6), &nh, &ev, 0);
	} else if (nh == IPPROTO_IPIP) {
		struct iphdr in4;

		ev.encap = 1;
		if (bpf_probe_read_kernel(&in4, sizeof(in4), data + off) < 0)
			return 0;
		nh = in4.protocol;
		off += in4.ihl * 4;
	}
	if (!off)
		return 0;
	off = l4_payload(data, off, nh);
	if (!off || bpf_probe_read_kernel(&p, sizeof(p), data + off) < 0 || p.magic != oam_magic)
		return 0;
	ev.ts = bpf_ktime_get_ns();
	ev.netns = inum;
	ev.ifindex = BPF_CORE_READ(skb, dev, ifindex);
	ev.seq = p.seq;
	ev.magic = p.magic;
	ev.len = BPF_CORE_READ(skb, len);
	ev.reason = reason;
	bpf_ringbuf_output(&oam_rx_events, &ev, sizeof(ev), 0);
	return 0;
}

/* A packet the lab's namespace is about to receive: skb->data is its
 * network header (eth_type_trans pulled the MAC header; network_header
 * is only reset after this tracepoint). */
SEC("tp_btf/netif_receive_skb")
int oam_rx(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	__u32 inum = BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);

	if (!bpf_map_lookup_elem(&oam_nodes, &inum))
		return 0;
	return oam_see(skb, BPF_CORE_READ(skb, data), inum, 0);
}

/* kfree_skb(skb, location, reason, rx_sk): a packet dropped, with the
 * kernel's reason (enum skb_drop_reason; SKB_CONSUMED, 1, is no drop).
 * skb->data may be anywhere by now: the network header is read through
 * head + network_header. */
#define OAM_SKB_CONSUMED 1

SEC("tp_btf/kfree_skb")
int oam_drop(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	__u32 reason = (__u32)ctx[2];
	struct net_device *dev;
	__u32 inum;

	if (reason <= OAM_SKB_CONSUMED)
		return 0;
	dev = BPF_CORE_READ(skb, dev);
	if (!dev)
		return 0;
	inum = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	if (!bpf_map_lookup_elem(&oam_nodes, &inum))
		return 0;
	return oam_see(skb, BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, network_header), inum, reason);
}

char _license[] SEC("license") = "Dual BSD/GPL";

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain userspace SR-aware services (pkg/srv6svc): steer the packets whose
 * IPv6 destination is a bound SID (or lies in a bound SID prefix, whose low
 * bits are ARGS) to the AF_XDP socket of the service on the receiving queue.
 * Every other packet goes on to the kernel path untouched (XDP_PASS).
 *
 * Each binding has its own veth pair (loop -> own): an AF_XDP socket can
 * only take frames of the device and queue it is bound to, and only one
 * process can bind a device queue, so the program on the receiving
 * interface redirects a bound SID's frame (DEVMAP) to the binding's loop
 * veth; on the peer ("own"), the same program redirects it to the socket of
 * the receiving queue. The service sends processed frames on loop too; on
 * own, these arrive on the loop side, where srv6svc_tc (TCX ingress) hands a
 * frame whose next SID another binding serves to that binding's pair;
 * anything else goes on to the node's stack, which routes it.
 *
 * When no socket is bound for the SID on this queue (the service died: the
 * kernel removes a closed socket from the XSKMAP), the SID's on-failure
 * policy applies: bypass passes the packet to the kernel (whose seg6local End
 * route for the SID then applies End), drop drops it. Both are counted. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include "lib/ipv6_walk.h"
#include "lib/csid.h"

#define SVC_MAX_SLOTS 64   /* services (bindings) per namespace */
#define SVC_MAX_QUEUES 64  /* receive queues per interface a service serves */
#define SVC_MAX_SIDS 1024  /* SIDs / SID prefixes over all services */
#define SVC_META_HANDOVER 0x53365356 /* XDP metadata: "hand this skb over" */

enum svc_flag {
	SVC_F_BYPASS = 1, /* on-failure bypass (else drop) */
};

/* svc_key: LPM trie key, a SID prefix (prefixlen 128 for a plain SID). */
struct svc_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct svc_val {
	__u32 slot;	   /* the binding: index into svc_counters / svc_infos, XSKMAP row, DEVMAP key */
	__u32 flags;	   /* enum svc_flag */
	__u32 own_ifindex; /* the binding's own veth, where its sockets are bound */
	__u32 loop_ifindex; /* its peer: redirecting there delivers to own */
	__u8 own_mac[ETH_ALEN]; /* its MAC: a frame handed over is addressed to it,
				 * so that the stack there accepts it (bypass) */
	__u8 csid_lb;	   /* a uSID binding (RFC 9800 NEXT-C-SID): the locator
			    * block and one C-SID in bytes; 0: full SIDs */
	__u8 csid_nf;
	__u32 max_len;	   /* longest frame the binding's pair takes (its MTU +
			    * the Ethernet header): a longer one would fail
			    * the redirect after this program, uncounted */
};

/* svc_stats: per slot, per CPU, counted here in the kernel. */
struct svc_stats {
	__u64 steered;	      /* redirected to the service's socket */
	__u64 steered_bytes;
	__u64 nosock_drop;    /* no socket on the queue, on-failure drop */
	__u64 nosock_bypass;  /* no socket on the queue, on-failure bypass */
	__u64 malformed;      /* bound SID but no valid SRH with SL > 0: dropped */
	__u64 too_big;        /* longer than the binding's pair takes: dropped */
	__u64 csid_padding;   /* uSID binding: a non-zero C-SID after the
			       * container's end (invalid padding): dropped */
	__u64 hop_limit;      /* handed back to this binding by srv6svc_tc
			       * with a hop limit <= 1: dropped */
};

/* svc_info: per slot, written by the service process (userspace counters
 * and who serves the slot), read by `segchain sid show`. */
struct svc_info {
	__u32 pid;
	__u32 queues;
	__u32 flags;	  /* SVC_INFO_* */
	__u32 sids;
	__u64 rx;
	__u64 tx;
	__u64 drop_verdict;
	__u64 drop_malformed;
	__u64 drop_tx_full;
	__u64 modified;
	__u64 started_ns; /* CLOCK_REALTIME ns when the process bound */
	char name[32];
	char mode[128];	  /* e.g. "xdp=eth0:native,s6svc0k:native xsk=copy mtu=1500" */
};

enum svc_info_flag {
	SVC_INFO_USED = 1,
	SVC_INFO_ASM = 2,
	SVC_INFO_BATCH = 4,
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SVC_MAX_SIDS);
	__type(key, struct svc_key);
	__type(value, struct svc_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, SVC_MAX_SLOTS * SVC_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_xsks SEC(".maps");

/* svc_devs: slot -> the binding's loop veth (redirecting there delivers
 * to its own veth). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, SVC_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_devs SEC(".maps");

/* svc_generic: the interfaces where this program runs in generic mode
 * (ifindex -> 1), where srv6svc_tc_in hands over GSO aggregates. Native
 * XDP never sees an aggregate: there an oversize frame is dropped here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_generic SEC(".maps");

/* svc_fwd: the loop sides (ifindex -> SVC_FWD_*) whose frames srv6svc_tc
 * forwards itself by FIB (Config.StackForward false, the default): the
 * frame the service sent is forwarded from TCX to the next SID's egress
 * instead of passing the IPv6 stack a second time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SVC_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_fwd SEC(".maps");

enum svc_fwd_flag {
	SVC_FWD_FIB = 1, /* forward by FIB from TCX */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SVC_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct svc_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SVC_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct svc_info);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} svc_infos SEC(".maps");

#define SVC_VLAN_VID 0x0fff	/* the VLAN ID bits of a TCI */
#define SVC_VLAN_LOOPS 16384	/* tags svc_untag reads at most: 64 KiB, more than a frame holds */
#define SVC_UNTAGGED 0		/* svc_untag: the frame is untagged IPv6 now */

static __always_inline int svc_is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/* svc_vlan_walk is what svc_vlan_step (a bpf_loop callback: verified once,
 * not once per tag) reads and writes. */
struct svc_vlan_walk {
	struct xdp_md *ctx;
	__u32 off;	/* the next tag, or what follows the last */
	__be16 proto;	/* the type behind the tags read so far */
	__u8 vid;	/* a tag with a VLAN ID (not a priority tag) was read */
};

static long svc_vlan_step(__u64 i, void *data)
{
	struct svc_vlan_walk *w = data;
	__be16 tag[2]; /* struct vlan_hdr: TCI, then the type */

	if (!svc_is_vlan(w->proto))
		return 1;
	if (bpf_xdp_load_bytes(w->ctx, w->off, tag, sizeof(tag)) < 0) {
		w->proto = 0; /* truncated: the kernel drops it */
		return 1;
	}
	if (tag[0] & bpf_htons(SVC_VLAN_VID)) {
		w->vid = 1;
		return 1;
	}
	w->proto = tag[1];
	w->off += sizeof(tag);
	return 0;
}

/* svc_untag: a frame with 802.1Q/802.1ad tags in front of its payload.
 * What the kernel does with it after XDP (__netif_receive_skb_core): a tag
 * with a VLAN ID goes to the VLAN device of that ID (which has no steering
 * program) or, without one, is for another host and dropped; priority tags
 * (VID 0), however many, are removed and the frame is processed as
 * untagged — to a bound SID that meant the kernel's route for it: the
 * on-failure bypass End route while the service was alive (the service
 * skipped: an IPS bypassed), or no route. So the steering takes a bound
 * SID's frame behind priority tags only, as untagged: the tags are removed
 * here (the kernel ignores their priority too) and the frame goes on as
 * any other. Anything else passes unchanged (XDP_PASS). */
static __always_inline int svc_untag(struct xdp_md *ctx, __be16 proto)
{
	struct svc_vlan_walk w = { .ctx = ctx, .off = sizeof(struct ethhdr), .proto = proto };
	struct svc_key key = { .prefixlen = 128 };
	__u8 macs[2 * ETH_ALEN];
	struct ethhdr *eth;

	bpf_loop(SVC_VLAN_LOOPS, svc_vlan_step, &w, 0);
	if (w.vid)
		return XDP_PASS; /* the VLAN device's, or another host's */
	if (svc_is_vlan(w.proto))
		return XDP_DROP; /* more tags than 64 KiB hold: no such frame */
	if (w.proto != bpf_htons(ETH_P_IPV6) ||
	    bpf_xdp_load_bytes(ctx, w.off + offsetof(struct ipv6hdr, daddr), key.addr, sizeof(key.addr)) < 0 ||
	    !bpf_map_lookup_elem(&svc_sids, &key))
		return XDP_PASS;
	if (bpf_xdp_load_bytes(ctx, 0, macs, sizeof(macs)) < 0 ||
	    bpf_xdp_adjust_head(ctx, (int)(w.off - sizeof(struct ethhdr))))
		return XDP_DROP; /* cannot happen: the IPv6 header follows */
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__builtin_memcpy(eth, macs, sizeof(macs));
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	return SVC_UNTAGGED;
}

SEC("xdp")
int srv6svc_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	struct svc_key key = {};
	struct svc_val *val;
	struct svc_stats *st;
	struct ipv6_sr_hdr srh;
	struct ipv6_walk w;
	__u32 idx, q;
	long ret;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (svc_is_vlan(eth->h_proto)) {
		int r = svc_untag(ctx, eth->h_proto);

		if (r != SVC_UNTAGGED)
			return r;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		eth = data;
		if ((void *)(eth + 1) > end)
			return XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return XDP_PASS;

	key.prefixlen = 128;
	__builtin_memcpy(key.addr, &ip6->daddr, 16);
	val = bpf_map_lookup_elem(&svc_sids, &key);
	if (!val)
		return XDP_PASS;
	idx = val->slot;
	st = bpf_map_lookup_elem(&svc_counters, &idx);
	if (!st) /* slot out of range: a corrupt entry, never steer */
		return XDP_PASS;

	/* A uSID binding (docs/usid.md): its prefix is block + uSID, so the
	 * LPM matches the uSID whatever follows it in the container. A
	 * container whose padding is invalid (a C-SID after the zero one)
	 * is dropped and counted; one that holds more uSIDs after the active
	 * one needs no SRH: the library's End shifts it (RFC 9800 NEXT-C-SID,
	 * Segments Left unchanged) and parses whatever headers follow. A
	 * consumed container goes on as a full SID does, below. */
	if (val->csid_nf) {
		struct in6_addr da;
		__u32 lb = (__u32)val->csid_lb * 8, nf = (__u32)val->csid_nf * 8;

		__builtin_memcpy(&da, &ip6->daddr, sizeof(da));
		if (!csid_padding_ok(&da, lb, nf)) {
			st->csid_padding++;
			return XDP_DROP;
		}
		if (csid_has_next(&da, lb, nf))
			goto steer;
	}

	/* A bound SID's packet must carry a valid SRH (ipv6_srh_valid) with a
	 * next segment: End needs one. The walk (lib/ipv6_walk.h, as the
	 * proxies' and the boundary's) finds it within IPV6_EXT_MAX extension
	 * headers; what follows the SRH is the service's to parse. Only the
	 * first SRH's place and Segments Left decide, so an SRH right after
	 * the IPv6 header (every packet segchain sends) is read in place:
	 * the walk's verdict on it is the same (it stops judging at the first
	 * routing header) and it costs two helper calls and copies, on each
	 * of the two runs a frame makes here (measured, issue 32). */
	if (ip6->nexthdr == IPPROTO_ROUTING && (void *)ip6 + sizeof(*ip6) + sizeof(srh) <= end) {
		struct ipv6_sr_hdr *h = (void *)(ip6 + 1);

		if (!ipv6_srh_valid(h) || !h->segments_left ||
		    sizeof(*eth) + sizeof(*ip6) + ipv6_ext_len(IPPROTO_ROUTING, h->hdrlen) > end - data)
			goto malformed;
	} else {
		ipv6_walk_xdp(ctx, end - data, sizeof(*eth) + sizeof(*ip6), ip6->nexthdr, &w);
		if (!w.srh_off || !w.sl)
			goto malformed;
		/* The walk read the SRH's fixed part; its segments must be in
		 * the frame too. */
		if (bpf_xdp_load_bytes(ctx, w.srh_off, &srh, sizeof(srh)) < 0 ||
		    w.srh_off + ipv6_ext_len(IPPROTO_ROUTING, srh.hdrlen) > end - data)
			goto malformed;
	}

steer:
	if (ctx->ingress_ifindex != val->own_ifindex) {
		__u32 q0 = idx * SVC_MAX_QUEUES;

		/* No process (the kernel removed its sockets, queue 0's with the
		 * others): apply on-failure here. Passing the frame on this
		 * interface keeps its skb whole, a partial checksum included
		 * (a host's checksum offload); handed over to the pair as an
		 * XDP frame, it would lose that and leave unfinished. */
		if (!bpf_map_lookup_elem(&svc_xsks, &q0))
			goto nosock;
		if (end - data > val->max_len) {
			/* Longer than the pair takes: with generic XDP this is
			 * an aggregate (GSO) skb of a host's TCP, which the
			 * kernel can segment, not XDP. Mark it for srv6svc_tc_in
			 * (TCX, same interface): it hands an aggregate over
			 * on the skb path (segmented on the way) and drops and
			 * counts anything else. */
			__u32 *meta, ifx = ctx->ingress_ifindex;

			if (!bpf_map_lookup_elem(&svc_generic, &ifx))
				goto too_big;
			if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
				goto too_big;
			meta = (void *)(long)ctx->data_meta;
			if ((void *)(meta + 1) > (void *)(long)ctx->data)
				goto too_big;
			*meta = SVC_META_HANDOVER;
			return XDP_PASS;
too_big:
			st->too_big++;
			return XDP_DROP;
		}
		/* Not on the binding's own veth yet: hand it over. */
		__builtin_memcpy(eth->h_dest, val->own_mac, ETH_ALEN);
		if (bpf_redirect_map(&svc_devs, idx, 0) == XDP_REDIRECT)
			return XDP_REDIRECT;
		goto nosock;
	}
	q = ctx->rx_queue_index;
	if (q >= SVC_MAX_QUEUES)
		goto nosock;
	ret = bpf_redirect_map(&svc_xsks, idx * SVC_MAX_QUEUES + q, 0);
	if (ret == XDP_REDIRECT) {
		st->steered++;
		st->steered_bytes += end - data;
		return XDP_REDIRECT;
	}
nosock:
	if (val->flags & SVC_F_BYPASS) {
		st->nosock_bypass++;
		return XDP_PASS;
	}
	st->nosock_drop++;
	return XDP_DROP;
malformed:
	st->malformed++;
	return XDP_DROP;
}

/* srv6svc_tc: TCX ingress on every binding's loop side, where the frames a
 * service sent enter the node's stack. A frame whose (new) destination is
 * a SID bound on this node goes straight to that binding's own veth (a hop:
 * hop limit - 1, below). On a
 * loop side in svc_fwd the rest is forwarded from here when the FIB can
 * (fib_forward); anything else continues into the stack. On the skb path
 * (not XDP) because frames sent over AF_XDP in copy mode are skbs already:
 * running XDP on them would copy each into a new page. */
/* fib_forward does what the stack's forwarding would do with a frame the
 * service sent (ip6_forward: route, hop limit, neighbour) when the FIB
 * resolves it to a neighbour on an egress interface: the hop limit
 * decremented, sent out through the neighbour (bpf_redirect_neigh, the
 * egress device's transmit: its TCX egress, the boundary's leak check among
 * them, runs).
 * Everything the stack must decide stays with the stack (TCX_NEXT): a
 * local destination, a SID of the node (an lwt route), a route that
 * encapsulates, a frame over the route's MTU (ICMPv6 Packet Too Big), a
 * hop limit that runs out (Time Exceeded), forwarding off, link-local
 * addresses, hop-by-hop options. A neighbour not yet resolved is resolved by the neighbour
 * output, as the stack's own output would. Not crossed: netfilter's
 * FORWARD and POSTROUTING hooks, IPsec forward policies, the forwarding
 * MIB counters (Config.StackForward keeps the stack for nodes whose rules
 * must see these frames). */
static __always_inline int fib_forward(struct __sk_buff *skb, struct ethhdr *eth, struct ipv6hdr *ip6)
{
	struct bpf_fib_lookup f = {};
	struct bpf_redir_neigh nh = {};
	long rc;

	/* Only the SRH right behind the IPv6 header, as every frame a service
	 * sends from a packet segchain built: hop-by-hop options (a router
	 * alert, a jumbogram) are the stack's to process when it forwards. */
	if (ip6->hop_limit <= 1 || ip6->nexthdr != IPPROTO_ROUTING)
		return TC_ACT_UNSPEC;
	f.family = AF_INET6;
	f.ifindex = skb->ingress_ifindex;
	f.tot_len = skb->len - ETH_HLEN;
	f.flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0FFFFFFF);
	f.l4_protocol = ip6->nexthdr;
	__builtin_memcpy(f.ipv6_src, &ip6->saddr, 16);
	__builtin_memcpy(f.ipv6_dst, &ip6->daddr, 16);
	/* SKIP_NEIGH: the neighbour output below looks the neighbour up (and
	 * resolves it like the stack when it is not yet known); looking it up
	 * here too cost a share of the lookup (profiled, issue 32). */
	rc = bpf_fib_lookup(skb, &f, sizeof(f), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return TC_ACT_UNSPEC;
	/* The lookup may have moved skb->data: check the headers again. */
	eth = (void *)(long)skb->data;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > (void *)(long)skb->data_end)
		return TC_ACT_UNSPEC;
	ip6->hop_limit--;
	/* bpf_redirect_neigh, not bpf_redirect: a plain redirect marks the
	 * skb redirected, the mark crosses a veth, and the next node's
	 * generic XDP then passes the frame without running (a userspace
	 * service there never got it: TestPrivilegedCryptChain). The
	 * neighbour output writes the MACs (the lookup's gateway, or the
	 * destination, is the next hop). */
	nh.nh_family = AF_INET6;
	__builtin_memcpy(nh.ipv6_nh, f.ipv6_dst, 16);
	return bpf_redirect_neigh(f.ifindex, &nh, sizeof(nh), 0);
}

SEC("tcx/ingress")
int srv6svc_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	struct svc_key key = {};
	struct svc_val *val;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC; /* TCX_NEXT: the uapi headers here predate it */
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_UNSPEC; /* TCX_NEXT: the uapi headers here predate it */
	key.prefixlen = 128;
	__builtin_memcpy(key.addr, &ip6->daddr, 16);
	val = bpf_map_lookup_elem(&svc_sids, &key);
	if (!val || !val->loop_ifindex) {
		__u32 ifx = skb->ingress_ifindex, *fwd = bpf_map_lookup_elem(&svc_fwd, &ifx);

		if (fwd && (*fwd & SVC_FWD_FIB))
			return fib_forward(skb, eth, ip6);
		return TC_ACT_UNSPEC; /* TCX_NEXT: the uapi headers here predate it */
	}
	/* Handed back to a binding of this node: a hop, as a router's
	 * forwarding (and the FIB path above) makes it: hop limit - 1, and a
	 * frame that arrives with <= 1 is dropped and counted, never sent on.
	 * Without it a handler whose Forward leaves the destination on its
	 * own SID (or SIDs that lead back to its binding) circulated between
	 * this program and the binding forever (no hop of the loop touched
	 * the frame): the hop limit bounds every such loop, at most 255
	 * passes. Not "the binding it came from": two SIDs of one binding
	 * in a row are a legitimate list, and only the handler knows which
	 * SID a frame arrived with. No ICMPv6 Time Exceeded: the source is
	 * the node's own service. */
	if (ip6->hop_limit <= 1) {
		__u32 idx = val->slot;
		struct svc_stats *st = bpf_map_lookup_elem(&svc_counters, &idx);

		if (st)
			st->hop_limit++;
		return TC_ACT_SHOT;
	}
	ip6->hop_limit--;
	__builtin_memcpy(eth->h_dest, val->own_mac, ETH_ALEN);
	return bpf_redirect(val->loop_ifindex, 0);
}

/* srv6svc_tc_in: TCX ingress on the interfaces a binding names. It acts
 * only on skbs the XDP program marked (a bound SID's, a socket serving it,
 * longer than the binding's pair takes): an aggregate (GSO: a host's TCP
 * over veth, seen by generic XDP whole) is redirected to the binding's
 * loop veth, whose transmit segments it (the loop side has no GSO while
 * the own side runs native XDP), each segment then steered on the own
 * side as usual; anything else is dropped and counted (too_big). */
SEC("tcx/ingress")
int srv6svc_tc_in(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u32 *meta = (void *)(long)skb->data_meta;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	struct svc_key key = {};
	struct svc_val *val;
	struct svc_stats *st;
	__u32 idx;

	if ((void *)(meta + 1) > data || *meta != SVC_META_HANDOVER)
		return TC_ACT_UNSPEC; /* TCX_NEXT */
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return TC_ACT_UNSPEC;
	key.prefixlen = 128;
	__builtin_memcpy(key.addr, &ip6->daddr, 16);
	val = bpf_map_lookup_elem(&svc_sids, &key);
	if (!val)
		return TC_ACT_UNSPEC;
	idx = val->slot;
	st = bpf_map_lookup_elem(&svc_counters, &idx);
	if (!st)
		return TC_ACT_UNSPEC;
	if (skb->gso_segs > 1 && skb->gso_size + (__u32)((void *)(ip6 + 1) - data) + 1024 <= val->max_len) {
		__builtin_memcpy(eth->h_dest, val->own_mac, ETH_ALEN);
		return bpf_redirect(val->loop_ifindex, 0);
	}
	st->too_big++;
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "Dual BSD/GPL";

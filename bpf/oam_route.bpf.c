// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain O-flag sampling without a hook on an interface (#30,
 * docs/oam.md "What a hook costs", docs/benchmarks.md "#30 session 13"):
 * the headend's marker as the chain's route (oam_encap: lwt in; and
 * oam_encap_xmit, a measurement: lwt xmit) and the segment nodes' tap as
 * a tracing program on the kernel's seg6local input (oam_sid_tap). Their
 * events and counts have oam_sample.bpf.c's layout (internal/oam reads
 * both alike). The marker's rate is a constant set when it is loaded. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#define OAM_OFLAG 0x20
#define OAM_ID_LEN 48
#define OAM_SRH_MAX_LAST 15 /* longest SID list marked: 16 SIDs */

#include "lib/core_netdev.h"

struct sk_buff {
	struct net_device *dev;
	unsigned char *head;
	__u16 network_header;
} __attribute__((preserve_access_index));

#include "lib/oam_events.h"

/* Mark 1 packet in oam_rate (0: none). Set by the loader. */
volatile const __u32 oam_rate;

/* oam_encap, the sampled chain's headend route itself (encap bpf in):
 * the route that held the kernel's `encap seg6` for the chain's
 * forwarded traffic holds this program instead while the chain is
 * sampled. Each packet is counted and encapsulated by the kernel's own
 * H.Encaps / H.Insert (bpf_lwt_push_encap: seg6_do_srh_encap or
 * seg6_do_srh_inline, then the next-hop lookup on the first SID) with
 * the route's SRH; every oam_rate-th one with the copy whose O-flag is
 * set. No hook on any interface: the chain's own packets pay the program
 * and the per-packet next-hop lookup (the kernel's route caches it), no
 * other packet pays anything. An SRH with an HMAC TLV is marked too: the
 * kernel computes the HMAC after the copy (seg6_push_hmac in
 * seg6_do_srh_encap), over the O-flag. */
#define OAM_SRH_MAX 512

/* The route's SRH as the kernel's encap pushes it (dataplane.EncodeSRH),
 * its copy with the O-flag, its length and encap type (BPF_LWT_ENCAP_SEG6
 * or _SEG6_INLINE). Set by the loader. */
volatile const __u8 oam_srh[OAM_SRH_MAX];
volatile const __u8 oam_srh_o[OAM_SRH_MAX];
volatile const __u32 oam_srh_len;
volatile const __u32 oam_encap_type;

SEC("lwt_in")
int oam_encap(struct __sk_buff *skb)
{
	struct oam_sample_event ev = {};
	struct oam_chain_val *v;
	__u32 zero = 0, len = oam_srh_len;
	__u64 n;

	if (len < 24 || len > OAM_SRH_MAX)
		return BPF_DROP;
	v = bpf_map_lookup_elem(&oam_chains, &zero);
	if (!v)
		return BPF_DROP;
	n = __sync_fetch_and_add(&v->seen, 1);
	if (!oam_rate || n % oam_rate) {
		if (bpf_lwt_push_encap(skb, oam_encap_type, (void *)oam_srh, len) < 0)
			return BPF_DROP;
		return BPF_OK;
	}
	/* Marked: the bytes the hops will report (H.Encaps: the inner
	 * header, which is the packet now; H.Insert: what follows the SRH,
	 * which is what follows the IPv6 header now). */
	bpf_skb_load_bytes(skb, oam_encap_type == BPF_LWT_ENCAP_SEG6 ? 0 : sizeof(struct ipv6hdr), ev.id, OAM_ID_LEN);
	if (bpf_lwt_push_encap(skb, oam_encap_type, (void *)oam_srh_o, len) < 0)
		return BPF_DROP;
	__sync_fetch_and_add(&v->marked, 1);
	ev.ts = bpf_ktime_get_ns();
	ev.ifindex = skb->ingress_ifindex;
	bpf_skb_load_bytes(skb, 24, ev.da, 16);
	ev.sl = oam_srh[3];
	ev.kind = 1;
	ev.chain = 1;
	bpf_ringbuf_output(&oam_sample_events, &ev, sizeof(ev), 0);
	return BPF_OK;
}

/* oam_sid_tap, fentry on the kernel's seg6local input
 * (seg6_local_input_core(net, sk, skb)): the tap as a tracing program
 * that only packets to a local SID of the kernel's (End, End.X,
 * End.DX6, End.BPF, ...) run, in every namespace: nothing on any
 * interface, no other packet pays. The network header is the SID's
 * packet before the behaviour: its destination is the SID. Reports what
 * oam_sampled reports (the netns of the SID's route, the receiving
 * device). */
SEC("fentry/seg6_local_input_core")
int oam_sid_tap(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[2];
	struct net *net = (struct net *)ctx[0];
	struct oam_sample_event ev = {};
	struct {
		struct ipv6hdr ip6;
		struct srh_fixed srh;
	} h;
	unsigned char *nh = BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, network_header);

	if (bpf_probe_read_kernel(&h, sizeof(h), nh) < 0 || h.ip6.nexthdr != IPPROTO_ROUTING ||
	    h.srh.type != 4 || !(h.srh.flags & OAM_OFLAG))
		return 0;
	ev.ts = bpf_ktime_get_ns();
	ev.netns = BPF_CORE_READ(net, ns.inum);
	ev.ifindex = BPF_CORE_READ(skb, dev, ifindex);
	__builtin_memcpy(ev.da, &h.ip6.daddr, 16);
	bpf_probe_read_kernel(ev.id, OAM_ID_LEN, nh + sizeof(h.ip6) + ((__u32)h.srh.hdrlen + 1) * 8);
	ev.sl = h.srh.sl;
	bpf_ringbuf_output(&oam_sample_events, &ev, sizeof(ev), 0);
	return 0;
}

/* oam_encap_xmit, a measurement (segchain perf's T.Encaps.xmit, not
 * used by sampling): the chain's route as `encap bpf xmit` with the first
 * SID's gateway, the program pushing the whole outer header (IPv6 and
 * SRH, oam_hdr) itself and the packet leaving by the route's own next
 * hop: no route lookup after the encapsulation. It copies the inner
 * packet's traffic class and flow label and sets the payload length, as
 * the kernel's H.Encaps does with seg6_flowlabel 0; it computes no HMAC,
 * and the kernel refuses to push it on a GSO packet (handle_gso_encap
 * knows no routing header), so it is no replacement for the kernel's
 * encapsulation: it shows what a route without a lookup would cost. */
volatile const __u8 oam_hdr[OAM_SRH_MAX];
volatile const __u8 oam_hdr_o[OAM_SRH_MAX];
volatile const __u32 oam_hdr_len;

SEC("lwt_xmit")
int oam_encap_xmit(struct __sk_buff *skb)
{
	struct oam_chain_val *v;
	__u32 zero = 0, len = oam_hdr_len, flow, plen;
	struct ipv6hdr *ip6;
	void *data, *data_end;
	__u64 n;
	int ret;

	if (len < 40 + 24 || len > OAM_SRH_MAX || skb->protocol != bpf_htons(ETH_P_IPV6))
		return BPF_DROP;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (data + 4 > data_end)
		return BPF_DROP;
	flow = *(__u32 *)data;
	plen = skb->len;
	v = bpf_map_lookup_elem(&oam_chains, &zero);
	if (!v)
		return BPF_DROP;
	n = __sync_fetch_and_add(&v->seen, 1);
	if (!oam_rate || n % oam_rate)
		ret = bpf_lwt_push_encap(skb, BPF_LWT_ENCAP_IP, (void *)oam_hdr, len);
	else {
		ret = bpf_lwt_push_encap(skb, BPF_LWT_ENCAP_IP, (void *)oam_hdr_o, len);
		__sync_fetch_and_add(&v->marked, 1);
	}
	if (ret < 0)
		return BPF_DROP;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	ip6 = data;
	if ((void *)(ip6 + 1) > data_end)
		return BPF_DROP;
	*(__u32 *)ip6 = flow;
	ip6->payload_len = bpf_htons(plen + len - sizeof(*ip6));
	return BPF_OK;
}

char _license[] SEC("license") = "Dual BSD/GPL";

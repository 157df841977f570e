// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* segchain native-SID echo responder (internal/oam, segchain ping): a TCX
 * ingress program on a node's interfaces that answers ICMPv6 echo
 * requests addressed to the node's native SIDs (RFC 9259 §3.1: ping to a
 * SID). Linux's seg6local does not process upper-layer headers at a SID
 * (RFC 8986 §4.1.1) and drops a packet addressed to one without an SRH,
 * so neither iputils' ping nor segchain's gets an answer otherwise.
 *
 * A request is answered when it is IPv6 with no extension header, an
 * ICMPv6 echo request (type 128, code 0), and its destination is one of
 * the node's SIDs: oam_sids, an LPM trie the loader fills with the
 * prefixes of the namespace's seg6local routes (they are local routes,
 * which bpf_fib_lookup does not tell from the node's own addresses). The
 * reply is the request turned around in place: addresses swapped (the SID
 * is the source), hop limit 64, type 129 (the checksum updated for the
 * type: the pseudo-header's sum does not change when the addresses swap),
 * sent where the FIB routes the requester (its neighbour's address from
 * the FIB, or the kernel's neighbour output).
 * Everything else goes on unchanged (TCX_NEXT). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define OAM_TCX_NEXT (-1)
#define AF_INET6 10

struct oam_sid_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* oam_sids: the node's SIDs (its seg6local routes' prefixes). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct oam_sid_key);
	__type(value, __u8);
} oam_sids SEC(".maps");

/* oam_echo_stats[0]: echo requests answered; [1]: to the locator but not
 * answered (the FIB has no route back to the requester). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} oam_echo_stats SEC(".maps");

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&oam_echo_stats, &k);

	if (v)
		(*v)++;
}

SEC("tcx/ingress")
int oam_echo(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct icmp6hdr *icmp = (void *)(ip6 + 1);
	struct bpf_fib_lookup fib = {};
	struct oam_sid_key key;
	struct in6_addr a;
	long rc;

	if ((void *)(icmp + 1) > data_end || skb->protocol != bpf_htons(ETH_P_IPV6) ||
	    ip6->nexthdr != IPPROTO_ICMPV6 || icmp->icmp6_type != ICMPV6_ECHO_REQUEST || icmp->icmp6_code != 0)
		return OAM_TCX_NEXT;
	key.prefixlen = 128;
	__builtin_memcpy(key.addr, &ip6->daddr, 16);
	if (!bpf_map_lookup_elem(&oam_sids, &key))
		return OAM_TCX_NEXT;
	/* Where the reply goes: the requester, from the SID. */
	__builtin_memset(&fib, 0, sizeof(fib));
	fib.family = AF_INET6;
	fib.ifindex = skb->ifindex;
	__builtin_memcpy(fib.ipv6_dst, &ip6->saddr, 16);
	__builtin_memcpy(fib.ipv6_src, &ip6->daddr, 16);
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH) {
		count(1);
		return OAM_TCX_NEXT;
	}
	a = ip6->saddr;
	ip6->saddr = ip6->daddr;
	ip6->daddr = a;
	ip6->hop_limit = 64;
	if (bpf_l4_csum_replace(skb, sizeof(*eth) + sizeof(*ip6) + 2, bpf_htons(ICMPV6_ECHO_REQUEST << 8),
				bpf_htons(ICMPV6_ECHO_REPLY << 8), 2) < 0)
		return 2; /* TC_ACT_SHOT: the packet was half rewritten */
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	icmp = (void *)((struct ipv6hdr *)(eth + 1) + 1);
	if ((void *)(icmp + 1) > data_end)
		return 2;
	icmp->icmp6_type = ICMPV6_ECHO_REPLY;
	count(0);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return bpf_redirect_neigh(fib.ifindex, NULL, 0, 0);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	return bpf_redirect(fib.ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";

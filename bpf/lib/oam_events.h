/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What both O-flag markers (oam_sample.bpf.c: TCX; oam_route.bpf.c: the
 * chain's route) and the taps report and count: one layout, because
 * internal/oam reads the events and counts of either program alike.
 * Needs OAM_ID_LEN. */
#ifndef SEGCHAIN_OAM_EVENTS_H
#define SEGCHAIN_OAM_EVENTS_H

/* oam_sample_event is a sampled packet marked (kind 1) or seen (kind 0). */
struct oam_sample_event {
	__u64 ts;		/* bpf_ktime_get_ns */
	__u32 netns;		/* the receiving namespace's inode (kind 0) */
	__u32 ifindex;
	__u8 da[16];		/* the packet's destination */
	__u8 id[OAM_ID_LEN];	/* the bytes after the SRH */
	__u8 sl;		/* Segments Left */
	__u8 kind;
	__u8 pad[2];
	__u32 chain;		/* kind 1: oam_chain_val.id */
};

const struct oam_sample_event *oam_sample_event_type __attribute__((unused));

struct oam_chain_val {
	__u64 seen;	/* the chain's packets that left the headend */
	__u64 marked;
	__u64 hmac;	/* not marked: the SRH carries an HMAC TLV */
};

const struct oam_chain_val *oam_chain_val_type __attribute__((unused));

/* oam_chains[0]: the marker's counts (an array: its lookup is inlined). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oam_chain_val);
} oam_chains SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} oam_sample_events SEC(".maps");

struct srh_fixed {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;
	__u8 sl;
	__u8 last;
	__u8 flags;
	__u16 tag;
};

#endif

/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Compressed SIDs (RFC 9800, NEXT-C-SID flavor, "uSID"): a container is an
 * IPv6 destination address Locator-Block (lblen bits) | active C-SID (nflen
 * bits) | Argument (the C-SIDs still to come, left-aligned, zero padded).
 * The helpers work on a copy of the DA; the caller writes it back. lblen and
 * nflen are bit counts, multiples of 8 as the kernel requires
 * (seg6local's next_csid_chk_lcblock_bits / _lcnode_fn_bits), so the
 * arithmetic is whole bytes. The Go twin is internal/csid. */
#ifndef SEGCHAIN_LIB_CSID_H
#define SEGCHAIN_LIB_CSID_H

#include <linux/types.h>
#include <linux/in6.h>

#define CSID_ADDR_BYTES 16

/* csid_has_next reports whether the Argument of container da is non-zero:
 * another C-SID follows in this container (RFC 9800 4.1.1, the End with
 * NEXT-C-SID pseudocode: "If (DA.Argument != 0)"). */
static __always_inline int csid_has_next(const struct in6_addr *da, __u32 lblen, __u32 nflen)
{
	__u32 from = (lblen + nflen) / 8;
	int i;

#pragma unroll
	for (i = 0; i < CSID_ADDR_BYTES; i++)
		if (i >= from && da->in6_u.u6_addr8[i])
			return 1;
	return 0;
}

/* csid_shift is the NEXT-C-SID End on container da: the Argument moves
 * left by nflen into the C-SID's place, zero filled ("Copy DA.Argument
 * into the bits [LBL..(LBL+AL-1)] of the DA; set the bits
 * [(LBL+AL)..127] of the DA to zero"). Call it when csid_has_next. */
static __always_inline void csid_shift(struct in6_addr *da, __u32 lblen, __u32 nflen)
{
	__u32 lb = lblen / 8, nb = nflen / 8;
	int i;

#pragma unroll
	for (i = 0; i < CSID_ADDR_BYTES; i++) {
		if (i < lb)
			continue;
		/* i + nb < 16 is checked, so the read stays inside the address. */
		if (i + nb < CSID_ADDR_BYTES)
			da->in6_u.u6_addr8[i] = da->in6_u.u6_addr8[(i + nb) & (CSID_ADDR_BYTES - 1)];
		else
			da->in6_u.u6_addr8[i] = 0;
	}
}

/* csid_next applies NEXT-C-SID End to da: 1 when it shifted (the packet
 * goes on with the new DA, Segments Left unchanged), 0 when the container
 * is consumed (the caller does what End does with a full SID: SL--, DA <-
 * Segment List[SL]). nflen 0 means the SID is not compressed: 0. */
static __always_inline int csid_next(struct in6_addr *da, __u32 lblen, __u32 nflen)
{
	if (!nflen || !csid_has_next(da, lblen, nflen))
		return 0;
	csid_shift(da, lblen, nflen);
	return 1;
}

/* csid_padding_ok checks container da's Argument: once a C-SID is all
 * zero (the end of the container) every bit after it must be zero too.
 * RFC 9800 does not make End check it, and the kernel does not: it shifts
 * the zero C-SID into place and the packet dies on a missing route. A
 * segchain service drops it itself, counted with its reason. nflen 0: 1. */
static __always_inline int csid_padding_ok(const struct in6_addr *da, __u32 lblen, __u32 nflen)
{
	__u32 from = (lblen + nflen) / 8, nb = nflen / 8;
	__u8 cur = 0, end = 0;
	int i;

	if (!nb)
		return 1;
#pragma unroll
	for (i = 0; i < CSID_ADDR_BYTES; i++) {
		if (i < from)
			continue;
		cur |= da->in6_u.u6_addr8[i];
		if ((i + 1 - from) % nb == 0 || i == CSID_ADDR_BYTES - 1) {
			/* the end of one C-SID (or of the address) */
			if (end && cur)
				return 0;
			if (!cur)
				end = 1;
			cur = 0;
		}
	}
	return 1;
}

/* csid_key masks container da to its Locator-Block and active C-SID
 * ((lblen + nflen) / 8 bytes, the rest zero): the key a service's uSID is
 * stored under in an exact-match map. */
static __always_inline void csid_key(struct in6_addr *k, const struct in6_addr *da, __u32 bytes)
{
	int i;

#pragma unroll
	for (i = 0; i < CSID_ADDR_BYTES; i++)
		k->in6_u.u6_addr8[i] = i < bytes ? da->in6_u.u6_addr8[i] : 0;
}

#endif

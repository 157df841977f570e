/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Drop-reason pattern: every program defines `enum <prog>_drop_reason`
 * (exported to Go with bpf2go -type, which gives it a String()) and counts
 * each drop in a per-CPU array before returning the drop verdict, so no
 * packet ever disappears uncounted. */
#ifndef SEGCHAIN_LIB_DROP_H
#define SEGCHAIN_LIB_DROP_H

#include <linux/types.h>

/* count_drop increments slot reason of a per-CPU counter array embedded in a
 * stats struct; max is the array length (the enum's _MAX). */
#define count_drop(stats, reason, max)                                         \
	do {                                                                   \
		__u32 __r = (reason);                                          \
		if ((stats) && __r < (max))                                    \
			(stats)->drops[__r]++;                                 \
	} while (0)

#endif

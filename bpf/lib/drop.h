/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Drop-reason pattern: every program defines `enum <prog>_drop_reason`, one
 * enumerator a line, each with a comment that starts with its quoted name
 * (X_DROP_BAD_SRH's comment starts "bad-srh": ...), ending with X_DROP_MAX. bpf2go
 * -type exports the numbers; cmd/bpfconst (go generate) writes the Go
 * DropReason constants and String() from the names, so the C enum is the
 * only list. Each drop is counted in a per-CPU array before the program
 * returns the drop verdict, so no packet ever disappears uncounted. */
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

// Package bpfpin is where segchain's eBPF programs keep their state: one
// bpffs directory per network namespace (Root/ns-<inode>-<cookie>/<program>)
// holding pinned maps and the pinned TCX links of the program on every
// interface, so the data path survives the CLI and the agent. The proxy and
// the firewall both use it; their programs chain on TCX ingress. Locked and
// LockFile are how a program's verbs (the firewall's, End.AN.NF's) reach
// that state: one writer at a time, and nothing created by a verb that
// only reads or removes.
package bpfpin

// Package datapath installs the pool selector (bpf/pool_tc.bpf.c) at a
// chain's headend: the program on TCX egress of every interface, its maps
// pinned per namespace (bpffs, internal/bpfpin), the pools written into
// them, and the liveness word per pool that the health checker
// (internal/health) writes directly. docs/pools.md says why a tc program.
package datapath

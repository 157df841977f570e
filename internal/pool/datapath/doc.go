// Package datapath installs the pool selector (bpf/pool_tc.bpf.c) at a
// chain's headend: pool_in on TCX ingress of every interface (it
// classifies a chain's packet, chooses the instance and marks it), a
// table per chain and instance holding that instance's SID list with a
// rule into it (Select), pool_out on TCX egress (locally originated
// packets), the maps pinned per namespace (bpffs, internal/bpfpin), the
// pools written into them, and the liveness word per pool that the
// health checker (internal/health) writes directly. docs/pools.md says
// why this design.
package datapath

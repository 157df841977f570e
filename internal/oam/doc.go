// Package oam traces a chain function by function: segchain trace sends a
// probe of the chain's own flow in at its headend and reports, for every
// hop (each SID, the SF behind a proxy, the egress and the delivery
// after it), whether the probe got there, when, and how long the hop held
// it, from timestamps a TCX program takes on every interface of the lab
// (bpf/oam_tc.bpf.c). A broken chain is named by its first hop that the
// probe did not get through, with the counters that went up meanwhile.
package oam

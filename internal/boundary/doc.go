// Package boundary is the data path of segchain's SR domain boundary
// (RFC 8754 section 5.1): a tc eBPF program attached with TCX to the
// ingress and egress of every boundary interface of a node, which drops
// packets addressed to the domain's SID space (and SRv6 addressed to the
// domain's nodes) arriving from outside, and SID-space packets leaving it,
// counting each drop per interface and reason. State is pinned per network
// namespace; Apply, Remove, Observe and Counters are what the agent calls.
package boundary

// Package cpbench measures the control plane at scale: a generated domain
// of N nodes in a line with chains spanning them, brought up as a lab with
// a real agent per node (lab up --agents); it times apply from scratch, a
// no-op apply and a one-chain change through the agents, and reads the
// agents' resident memory (segchain perf control-plane, docs/benchmarks.md).
package cpbench

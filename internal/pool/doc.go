// Package pool is the pure half of service-function pools (docs/pools.md):
// a pool's instances and policies as plain data, and the reference model
// of the per-flow selection the headend's eBPF program makes (weighted
// rendezvous hashing over the live instances). The data path
// (internal/pool/datapath) and its tests check the program against it.
package pool

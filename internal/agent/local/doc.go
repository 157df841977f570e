// Package local is the in-namespace agent: Local implements agent.Agent
// by observing and changing one network namespace on this machine through
// netlink, bpffs and the service kinds' data paths (kinds.go lists their
// node halves). The controller uses it in-process for a node without an
// `agent:` address; the `segchain agent` daemon (internal/agent/daemon)
// serves it over gRPC (internal/agent/rpc/server) for one with. Only this
// package and the data-path packages below it touch the kernel; the
// protocol (package agent) is plain data.
package local

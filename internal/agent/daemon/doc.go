// Package daemon is the `agent` command: the daemon that serves one
// node to remote controllers over gRPC + mutual TLS (docs/agents.md). It
// wires the in-namespace agent (internal/agent/local, under the node's
// lock) behind the gRPC server (internal/agent/rpc/server), with the
// node's journal and intent under --state-dir, its BGP speaker, /metrics
// and, with --reconcile, the reconcile loop (internal/agent/reconcile).
// Both `segchain agent` and the segchain-agent binary run it; the latter
// links only the agent's packages, so an agent process maps less of its
// binary.
package daemon

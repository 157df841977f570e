// Package daemon is the `agent` command: the daemon that serves one
// node to remote controllers over gRPC + mutual TLS (docs/agents.md). Both
// `segchain agent` and the segchain-agent binary run it; the latter links
// only the agent's packages, so an agent process maps less of its binary.
package daemon

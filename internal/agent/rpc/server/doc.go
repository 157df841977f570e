// Package server is the agent's end of the agent protocol: Server serves
// any agent.Agent over gRPC + mutual TLS (what the `segchain agent`
// daemon, internal/agent/daemon, runs on a node around the in-namespace
// agent, internal/agent/local): leases, op validation, the node's journal
// and intent, and the agent's own in-process lease for its reconcile
// (Self). The controller's end is internal/agent/rpc/client.
package server

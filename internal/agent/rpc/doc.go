// Package rpc serves any agent.Agent over gRPC (Server, what
// `segchain agent` runs on a node) and implements agent.Agent on top of a
// gRPC connection (Client, what the controller uses for a node with an
// `agent:` address). Node state and op batches cross the wire as JSON in
// typed protobuf envelopes (proto/segchain/agent/v1, docs/agents.md).
package rpc

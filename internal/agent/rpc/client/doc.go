// Package client is the controller's end of the agent protocol: Client
// implements agent.Agent over a gRPC connection to a node's `segchain
// agent` (leases, the journal kept on the agent, the intent handed to it),
// and Journal keeps each remote node's journal on its agent. The other
// end is internal/agent/rpc/server.
package client

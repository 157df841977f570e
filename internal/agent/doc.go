// Package agent is the protocol between the controller and a node: an
// Agent observes the state segchain manages on one node and executes the
// ops the controller computed, and declares in Caps what else it can do
// (caps.go). Op and the other types here are plain data so that a remote
// agent can serve the same interface over the wire; this package must not
// link eBPF or netlink (test/layering checks).
//
// The agent tree, one question each:
//
//	internal/agent              the interface, its ops and capabilities (this package)
//	internal/agent/local        the in-namespace agent: Local changes one network namespace
//	internal/agent/rpc          what both ends of the gRPC protocol share (version, limits, validation)
//	internal/agent/rpc/client   the gRPC client: Client, a remote node's agent for the controller
//	internal/agent/rpc/server   the gRPC server: Server, any Agent served to controllers
//	internal/agent/rpc/agentpb  the generated protobuf code (proto/segchain/agent/v1)
//	internal/agent/daemon       the `segchain agent` daemon: Local behind a Server, plus BGP, metrics, reconcile
//	internal/agent/reconcile    the agent's reconcile loop (--reconcile): one node kept at its last intent
//	internal/agent/agenttest    the in-memory Agent and Journal every test uses
//
// There are two reconcile loops, on purpose: `segchain watch`
// (controller.Watch) re-applies a whole domain from the controller's host
// when links come up; the agent's (internal/agent/reconcile) keeps one
// node at the intent a controller last handed it and yields to every
// controller. internal/agent/reconcile's doc says why they stay apart.
package agent

// Package agent is the protocol between the controller and a node: an
// Agent observes the state segchain manages on one node and executes the
// ops the controller computed. Op and the other types here are plain data
// so that a remote agent can serve the same interface over the wire; the
// in-namespace implementation is internal/agent/local, and this package must
// not link eBPF or netlink (test/layering checks).
package agent

// Package agent is the node side of segchain: an Agent observes the state
// segchain manages on one node and executes the ops the controller computed.
// Local serves a namespace on this machine in-process; the Op type is plain
// data so that a remote agent can serve the same interface over the wire.
package agent

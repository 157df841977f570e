// Package session is one apply session: everything a command that changes
// or reads a whole domain touches, built in one place (Open) — the domain
// and its plan, one agent per node (in-process in the node's namespace, or
// the node's remote agent over gRPC), the undo journals, the node locks
// and remote leases, the preflight of remote agents, and a lab's FRR hook.
// segchain apply, destroy, plan, watch and status, and the namespace
// tests, open a Session and call its verbs; the controller below it only
// diffs, orders and rolls back.
//
// The agent's own reconcile (internal/agent/reconcile) is the one apply
// that does not open a Session: it works on one node from the intent a
// controller handed it, in the agent's process, and takes that node's
// lock and lease through the agent it runs in (Begin). A Session would
// bring the lab, the gRPC client and the PKI into every agent, and this
// package imports reconcile (its holder names), so the import would turn
// round.
package session

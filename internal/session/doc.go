// Package session is one apply session: everything a command that changes
// or reads a whole domain touches, built in one place (Open) — the domain
// and its plan, one agent per node (in-process in the node's namespace, or
// the node's remote agent over gRPC), the undo journals, the node locks
// and remote leases, the preflight of remote agents, and a lab's FRR hook.
// segchain apply, destroy, plan, watch and status, and the namespace
// tests, open a Session and call its verbs; the controller below it only
// diffs, orders and rolls back.
package session

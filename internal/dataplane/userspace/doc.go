// Package userspace is the node half of the `userspace` service kind: a domain
// names a SID served by a userspace process (pkg/srv6svc; End.ASM
// included), apply waits until a live process has bound it (observe, apply,
// counters), and `segchain sid` shows every binding with its state, queues,
// modes and counters and removes the dead ones. Binding itself is done by
// the service process.
package userspace

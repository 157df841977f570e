// Package reconcile is `segchain agent --reconcile`: the agent keeps its
// node's last applied intent (Store, written atomically under the agent's
// --state-dir) and, when what it observes drifts from it, re-applies it
// with the controller's own diff and apply logic for that one node, under
// the node's lock and the agent's own lease (Reconciler). Pure data and
// file I/O: the agent's implementation is passed in (the daemon,
// internal/agent/daemon, wires it to the gRPC server's Self lease).
//
// Why this loop and `segchain watch`'s (controller.Watch) are two. Both
// re-apply through controller.Apply and wait Settle after a link comes
// up; what they own differs:
//
//   - Scope and intent. Watch runs on the controller's host for a whole
//     domain, its intent the domain file in hand; a trigger re-applies
//     every node, with cross-node ordering. Reconcile runs on the node,
//     for that node only, its intent the last one a controller handed it
//     (none, or suspended while a controller changes the node: it idles).
//   - The gate before applying. Watch applies unconditionally (Apply
//     observes and diffs) under the command's own locks and leases
//     (Controller.Lock), reports each apply, and goes on after a failure.
//     Reconcile observes first and decides (Decide): in sync, idle, or a
//     drift it must leave alone (a conflict, a kernel that cannot, another
//     command's unfinished journal); it changes the node only after taking
//     the agent's own lease and the node's lock without waiting, yielding
//     to any controller or local segchain command, and only if the intent
//     did not change meanwhile.
//   - Scheduling. Watch is driven by link events only. Reconcile also
//     checks every Interval and retries, with a doubling backoff, a check
//     that left drift behind for a reason that may pass (lock or lease
//     busy, a failed observe or re-apply).
//
// One loop for both would take all three as parameters, which is the two
// loops again behind flags; the shared parts (the apply engine, Settle)
// are shared.
package reconcile

// Package reconcile is `segchain agent --reconcile`: the agent keeps its
// node's last applied intent (Store, written atomically under the agent's
// --state-dir) and, when what it observes drifts from it, re-applies it
// with the controller's own diff and apply logic for that one node, under
// the node's lock and the agent's own lease (Reconciler). Pure data and
// file I/O: the agent's implementation is passed in.
package reconcile

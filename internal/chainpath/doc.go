// Package chainpath computes the path a chain's packets take now: from
// the headend, for each SID in order, the nodes the kernel's forwarding
// (each node's IPv6 main table, whoever installed the routes) leads
// through to the SID's node, every equal-cost branch included. It is pure:
// the routes come from the agents (agent.RouteReader), the links from the
// plan, so status under routing: static and bgp alike shows what the
// tables say, not what the plan intended.
package chainpath

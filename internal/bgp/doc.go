// Package bgp is a node's BGP speaker under routing: bgp: an embedded
// GoBGP v3 server that runs the node's intent (nodestate.BGP: eBGP in IPv6
// unicast over each link), installs the best paths (ECMP where equal) in
// the node's namespace with routing protocol nodestate.ProtoBGP, shuts a
// session at once when its link loses carrier and opens it again when the
// carrier returns. The segchain agent hosts it (local.Router).
//
// GoBGP opens its sockets from goroutines of its own, so the process that
// hosts a Speaker must live in the node's namespace (segchain agent
// re-executes itself there).
package bgp

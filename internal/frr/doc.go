// Package frr runs FRR (bgpd, zebra, bfdd) for the router nodes of a
// routing: bgp domain: it renders a router's configuration from its BGP
// intent (nodestate.BGP, computed by plan) and starts and stops one
// instance per namespace with every file of it under one directory.
package frr

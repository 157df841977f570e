// Package netfilter is the intent half of the `netfilter` service kind:
// End.AN.NF, the node's netfilter rule set run on the inner packet of SRv6
// traffic with the SID's ARGS as the mark (docs/netfilter.md). Its block
// sets the ARGS width and, optionally, an nft rule set file segchain loads
// into the node. The data path and node half are internal/dataplane/netfilter.
package netfilter

// Package netfilter is segchain's End.AN.NF (after the research's kernel
// behaviour of that name): the node's unchanged netfilter rule set
// (nftables, iptables, conntrack, NAT) runs on the inner packet of SRv6
// traffic with the SID's ARGS as the packet mark, then End is applied. It
// holds the two tc programs, the netfilter loop (a veth pair and a policy
// rule inside the node), the API the CLI and the agent call, and the
// `segchain sid` extension.
package netfilter

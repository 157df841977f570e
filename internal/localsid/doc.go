// Package localsid is the local SIDs of one node as `segchain sid` manages
// them (after srconf localsid and iproute2's seg6local): Parse and Format
// for the syntax, Manager for the verbs and the ownership rules (which SIDs
// are hand-made, the domain's or another tool's), behind the Node interface
// an agent can serve. Behaviours the kernel lacks (the eBPF SR proxies)
// plug in through Extension.
package localsid

// Package localsid parses and formats local SID definitions in the syntax of
// `segchain sid` (after srconf localsid and iproute2's seg6local): a SID, a
// behaviour and its iproute2-keyword parameters become a nodestate.Route.
// It also defines the Extension hook through which behaviours the kernel
// lacks (the eBPF SR proxies) plug into the same CLI.
package localsid

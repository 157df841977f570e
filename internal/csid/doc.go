// Package csid is the arithmetic of compressed SRv6 SIDs (RFC 9800
// NEXT-C-SID, "uSID"): a container is one 128-bit IPv6 address holding a
// locator block and up to (128-block)/nflen C-SIDs; Pack turns a chain's
// hops (uSIDs and full SIDs) into the fewest SID-list entries and Decode
// splits a container into its active and remaining C-SIDs. Pure Go: the
// plan, dump and the tests share it; the data path does the same in
// bpf/lib/csid.h and the kernel's End/End.X next-csid flavor.
package csid

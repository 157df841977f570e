// Package usid tests compressed SRv6 chains (sid.format: f3216, RFC 9800
// NEXT-C-SID) in namespace labs: the same traffic through the example
// domains in both formats, the packets checked by tshark and by a C-SID
// decoder written here from RFC 9800's text (not segchain's internal/csid).
package usid

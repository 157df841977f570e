// Package bfd is Bidirectional Forwarding Detection for segchain's own BGP
// speakers: RFC 5880 asynchronous mode over RFC 5881 single-hop IPv6
// (UDP port 3784, hop limit 255 both ways), one session per link. No
// maintained Go implementation exists, so it is written here from the
// RFCs; FRR's bfdd is the interoperability oracle (bfd_frr_test.go).
//
// Not implemented: authentication (a packet with the A bit is dropped),
// the Echo function (RequiredMinEchoRx is sent as 0), Demand mode (the D
// bit is never set; a peer's is ignored), multihop (RFC 5883).
package bfd

// Package dump is the SRv6-aware packet dissector behind `segchain dump`:
// it reads frames from a pcap/pcapng file or a live AF_PACKET socket,
// decodes the outer IPv6 header, the SRH and its TLVs (internal/srh) and the
// inner packet, verifies inner transport checksums, filters, annotates SIDs
// with the domain's structure and prints text (one line or a tree) or JSON.
package dump

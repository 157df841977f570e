// Package srh decodes and encodes IPv6 packets that carry a Segment Routing
// Header (RFC 8754, routing type 4) and its TLVs, and builds the headend
// encapsulations of RFC 8986 (H.Encaps, H.Encaps.Red, H.Encaps.L2, H.Insert).
// It is pure Go, strict on input (typed errors with byte offsets) and fuzzed:
// decoding then re-encoding any accepted header reproduces it byte for byte.
package srh

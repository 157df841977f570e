package dump

import (
	"errors"
	"fmt"

	"github.com/segchain/segchain/internal/srh"
)

// A malformed SRH is shown as tcpdump and tshark show it: every field that
// could be read (srh.Packet keeps a partial SRH on error), then a mark
// naming the faulty field and its byte offset in the IPv6 packet.

// srhFieldAt names the SRH field at byte off of the SRH.
func srhFieldAt(s *srh.SRH, off int) string {
	switch {
	case off < 0:
		return ""
	case off < 8:
		return [...]string{"next-header", "hdr-ext-len", "routing-type", "segments-left", "last-entry", "flags", "tag", "tag"}[off]
	case off < 8+16*(int(s.LastEntry)+1):
		return fmt.Sprintf("segment [%d]", (off-8)/16)
	}
	return "tlvs"
}

// appendFault appends "malformed: REASON at byte N (srh +K FIELD): DETAIL".
func appendFault(b []byte, pk *srh.Packet, err error) []byte {
	b = append(b, "malformed: "...)
	var pe *srh.ParseError
	if !errors.As(err, &pe) {
		return append(b, err.Error()...)
	}
	b = append(b, pe.Reason()...)
	b = append(b, " at byte "...)
	b = appendU(b, uint64(pe.Offset))
	// Inside the SRH (a fault at its end, such as a short IPv6 payload,
	// is not the SRH's).
	if s := pk.SRH; s != nil && pe.Offset >= pk.SRHOffset && pe.Offset < pk.SRHOffset+(int(s.HdrExtLen)+1)*8 {
		rel := pe.Offset - pk.SRHOffset
		b = append(b, " (srh +"...)
		b = appendU(b, uint64(rel))
		if f := srhFieldAt(s, rel); f != "" {
			b = append(b, ' ')
			b = append(b, f...)
		}
		b = append(b, ')')
	}
	if pe.Detail != "" {
		b = append(b, ": "...)
		b = append(b, pe.Detail...)
	}
	return b
}

// appendMalformedLine is the one-line form after "SRC > DST".
func (p *Printer) appendMalformedLine(b []byte, pk *srh.Packet, err error) []byte {
	if s := pk.SRH; s != nil {
		b = appendSRHFixedLine(b, s)
		if s.RoutingType != srh.RoutingTypeSRH {
			// Not an SRH: its type-specific data is not shown.
			b = append(b, " routing-type "...)
			b = appendU(b, uint64(s.RoutingType))
			b = append(b, ' ')
			b = appendFault(b, pk, err)
			return append(b, '\n')
		}
		b = append(b, " ["...)
		for i := len(s.Segments) - 1; i >= 0; i-- {
			b = s.Segments[i].AppendTo(b)
			if i > 0 {
				b = append(b, ", "...)
			}
		}
		if missing := int(s.LastEntry) + 1 - len(s.Segments); missing > 0 {
			if len(s.Segments) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, "... "...)
			b = appendU(b, uint64(missing))
			b = append(b, " unreadable"...)
		}
		b = append(b, ']')
		b = appendTLVsLine(b, s.TLVs)
	}
	b = append(b, ' ')
	b = appendFault(b, pk, err)
	return append(b, '\n')
}

// appendMalformedTree is the tree form after the IPv6 header lines.
func (p *Printer) appendMalformedTree(b []byte, pk *srh.Packet, err error) []byte {
	if s := pk.SRH; s != nil {
		b = append(b, "  srh (partial)"...)
		b = appendSRHFixedTree(b, s)
		b = append(b, '\n')
		if len(s.Segments) > 0 {
			b = append(b, "    segments read (wire index):\n"...)
			for i := len(s.Segments) - 1; i >= 0; i-- {
				b = append(b, "      ["...)
				b = appendU(b, uint64(i))
				b = append(b, "] "...)
				b = s.Segments[i].AppendTo(b)
				b = p.appendAnnotationTree(b, s.Segments[i])
				b = append(b, '\n')
			}
		}
		b = appendTLVsTree(b, "    tlvs read:\n", s.TLVs)
	}
	b = append(b, "  "...)
	b = appendFault(b, pk, err)
	return append(b, '\n')
}

// appendSRHFixedTree appends the SRH's fixed header fields as -v prints
// them (" next-header ... tag N").
func appendSRHFixedTree(b []byte, s *srh.SRH) []byte {
	b = append(b, " next-header "...)
	b = appendNH(b, s.NextHeader)
	b = append(b, " hdr-ext-len "...)
	b = appendU(b, uint64(s.HdrExtLen))
	b = append(b, " ("...)
	b = appendU(b, uint64(int(s.HdrExtLen)*8+8))
	b = append(b, " octets) routing-type "...)
	b = appendU(b, uint64(s.RoutingType))
	b = append(b, " segments-left "...)
	b = appendU(b, uint64(s.SegmentsLeft))
	b = append(b, " last-entry "...)
	b = appendU(b, uint64(s.LastEntry))
	b = append(b, " flags "...)
	b = appendHexN(b, uint64(s.Flags), 2)
	b = append(b, " tag "...)
	return appendU(b, uint64(s.Tag))
}

// appendTLVsLine appends " tlvs [...]" (nothing without TLVs).
func appendTLVsLine(b []byte, tlvs []srh.TLV) []byte {
	if len(tlvs) == 0 {
		return b
	}
	b = append(b, " tlvs ["...)
	for i, t := range tlvs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendTLVShort(b, t)
	}
	return append(b, ']')
}

// appendTLVsTree appends title and one line per TLV (nothing without TLVs).
func appendTLVsTree(b []byte, title string, tlvs []srh.TLV) []byte {
	if len(tlvs) == 0 {
		return b
	}
	b = append(b, title...)
	for _, t := range tlvs {
		b = append(b, "      "...)
		b = appendTLVLong(b, t)
		b = append(b, '\n')
	}
	return b
}

// appendSRHFixedLine appends " srh sl N le N tag N [flags F]", the one-line
// form of the fixed header.
func appendSRHFixedLine(b []byte, s *srh.SRH) []byte {
	b = append(b, " srh sl "...)
	b = appendU(b, uint64(s.SegmentsLeft))
	b = append(b, " le "...)
	b = appendU(b, uint64(s.LastEntry))
	b = append(b, " tag "...)
	b = appendU(b, uint64(s.Tag))
	if s.Flags != 0 {
		b = append(b, " flags "...)
		b = appendHexN(b, uint64(s.Flags), 2)
	}
	return b
}

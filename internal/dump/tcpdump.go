package dump

import (
	"fmt"
	"net"
)

// Extras are tcpdump's everyday output flags, added to the text renderings
// (line and tree; JSON carries the whole decode already):
// -e prefixes the link-level header, -X appends a hex and ASCII dump of the
// packet from its network header on, -A an ASCII-only dump.
type Extras struct {
	LinkHeader bool // -e
	Hex        bool // -X
	ASCII      bool // -A
}

// Prefix appends what goes before a packet's rendering (-e).
func (x Extras) Prefix(b []byte, r *Record) []byte {
	if !x.LinkHeader {
		return b
	}
	if r.Link == LinkEthernet && len(r.Data) >= 14 {
		return fmt.Appendf(b, "%s > %s, ethertype 0x%04x, length %d: ",
			net.HardwareAddr(r.Data[6:12]), net.HardwareAddr(r.Data[0:6]), r.EtherType, r.OrigLen)
	}
	return fmt.Appendf(b, "link type %d, length %d: ", r.Link, r.OrigLen)
}

// Suffix appends what goes after a packet's rendering (-X, -A).
func (x Extras) Suffix(b []byte, r *Record) []byte {
	if !x.Hex && !x.ASCII {
		return b
	}
	data := r.Data
	if off, _, err := linkPayload(r.Link, r.Data); err == nil {
		data = r.Data[off:]
	}
	for i := 0; i < len(data); i += 16 {
		row := data[i:min(i+16, len(data))]
		b = fmt.Appendf(b, "\t0x%04x:  ", i)
		if x.Hex {
			for j := 0; j < 16; j += 2 {
				switch {
				case j+1 < len(row):
					b = fmt.Appendf(b, "%02x%02x ", row[j], row[j+1])
				case j < len(row):
					b = fmt.Appendf(b, "%02x   ", row[j])
				default:
					b = append(b, "     "...)
				}
			}
			b = append(b, ' ')
		}
		for _, c := range row {
			if c < 0x20 || c > 0x7e {
				c = '.'
			}
			b = append(b, c)
		}
		b = append(b, '\n')
	}
	return b
}

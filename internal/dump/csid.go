package dump

import "net/netip"

// Compressed SIDs (RFC 9800 NEXT-C-SID): a SID whose SIDInfo has a C-SID
// format (SIDInfo.CSID) is a container; its annotation names the block, the
// active uSID and the uSIDs still to come, each with its owner when the
// resolver knows it.

// isContainer reports whether info describes a uSID (the resolver found
// the container's active uSID).
func (s SIDInfo) isContainer() bool { return s.CSID.NFLen > 0 }

// appendUSIDs appends " usid BLOCK active V[(owner)] next V[(owner)] ..."
// or " usid invalid (REASON)" for a container that does not decode.
func (p *Printer) appendUSIDs(b []byte, a netip.Addr, info SIDInfo) []byte {
	c, err := info.CSID.Decode(a)
	b = append(b, " usid "...)
	b = info.CSID.Block.AppendTo(b)
	if err != nil {
		b = append(b, " invalid ("...)
		b = append(b, err.Error()...)
		return append(b, ')')
	}
	b = append(b, " active "...)
	b = appendCSID(b, c.Active, info.CSID.NFLen)
	if len(c.Next) == 0 {
		return append(b, " last"...)
	}
	b = append(b, " next"...)
	for _, v := range c.Next {
		b = append(b, ' ')
		b = appendCSID(b, v, info.CSID.NFLen)
		if o, ok := p.lookup(info.CSID.SID(v)); ok && o.isContainer() {
			b = append(b, '(')
			b = append(b, o.Node...)
			if o.Service != "" {
				b = append(b, '/')
				b = append(b, o.Service...)
			}
			b = append(b, ')')
		}
	}
	return b
}

// appendNoSRHContainer annotates the destination of a packet without an
// SRH when it is a container (H.Encaps.Red of an all-uSID chain: the
// whole SID list is in the DA).
func (p *Printer) appendNoSRHContainer(b []byte, da netip.Addr) []byte {
	info, ok := p.lookup(da)
	if !ok || !info.isContainer() {
		return b
	}
	b = append(b, " da "...)
	b = da.AppendTo(b)
	b = append(b, " ("...)
	b = append(b, info.Node...)
	if info.Service != "" {
		b = append(b, '/')
		b = append(b, info.Service...)
	}
	b = p.appendUSIDs(b, da, info)
	return append(b, ')')
}

// usidJSON appends the "usid" object of a container.
func (p *Printer) usidJSON(b []byte, a netip.Addr, info SIDInfo) []byte {
	b = jkey(b, "usid")
	b = append(b, '{')
	b = jS(b, "block", info.CSID.Block.String())
	c, err := info.CSID.Decode(a)
	if err != nil {
		b = jS(b, "error", err.Error())
		return append(b, '}')
	}
	b = jU(b, "active", uint64(c.Active))
	b = jkey(b, "next")
	b = append(b, '[')
	for i, v := range c.Next {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendU(b, uint64(v))
	}
	b = append(b, ']')
	return append(b, '}')
}

// appendCSID appends a C-SID as hex digits without 0x, as addresses
// write it (02d0).
func appendCSID(b []byte, v uint32, bits int) []byte {
	for i := bits/4 - 1; i >= 0; i-- {
		b = append(b, hexdig[v>>(4*uint(i))&0xf])
	}
	return b
}

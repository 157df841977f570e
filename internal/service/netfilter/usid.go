package netfilter

// CSIDRefusal says why a netfilter service cannot take a uSID in an f3216
// domain ("" when it can). A uSID instance shifts its container on End
// (bpf/nf_tc.bpf.c); the bits after the uSID are the next uSIDs, so there
// are no ARGS to copy into the mark: a service that asks for them
// (netfilter.args > 0) keeps a full SID.
func (Kind) CSIDRefusal(block any, dir string) string {
	if c, _ := block.(*Config); c != nil && c.Args != nil && *c.Args > 0 {
		return "netfilter.args copies ARGS bits into the mark; a uSID container has none (they are the next uSIDs)"
	}
	return ""
}

// CSIDNeedsFullSRH: the data path's SRH walk (lib/ipv6_walk.h) refuses
// Segments Left > Last Entry, which a reduced SRH (H.Encaps.Red: SL = Last
// Entry + 1) has; plan keeps the full SRH for a chain of several
// containers through it (one container needs no SRH at all).
func (Kind) CSIDNeedsFullSRH() bool { return true }

package srunaware

// CSIDRefusal says why a proxy cannot take a uSID in an f3216 domain (""
// when it can: every proxy can). End.AS/End.AD/End.EAD shift the container
// on End (bpf/proxy_tc.bpf.c); End.AM ends its container (CSIDCloses).
func (Kind) CSIDRefusal(block any, dir string) string { return "" }

// CSIDCloses reports whether the proxy's uSID must be the last of its
// container: End.AM's SF gets the packet masqueraded with the SRH's last
// entry and the way back restores the DA from the SRH (Segment List[SL-1]),
// which a shifted container is in no entry of.
func (Kind) CSIDCloses(block any) bool {
	c, ok := block.(*Config)
	return ok && c.Behavior() == EndAM
}

// CSIDNeedsFullSRH: the data path's SRH walk (lib/ipv6_walk.h) refuses
// Segments Left > Last Entry, which a reduced SRH (H.Encaps.Red: SL = Last
// Entry + 1) has; plan keeps the full SRH for a chain of several
// containers through it (one container needs no SRH at all).
func (Kind) CSIDNeedsFullSRH() bool { return true }

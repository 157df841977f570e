package userspace

// Compressed SIDs (docs/usid.md). A userspace service takes a uSID
// anywhere in its container: the process binds it as a uSID
// (srv6svc.Config.CSID, the example services' --usid f3216), its steering
// program takes a container with uSIDs after the service's with or
// without an SRH, and the library's Forward shifts the container (RFC
// 9800 NEXT-C-SID) or, when it is consumed, moves to the next segment.
// The plan's Spec says so (usid 32/16); apply waits for a binding of
// that format.

// CSIDRefusal: every userspace service can take a uSID ("").
func (Kind) CSIDRefusal(block any, dir string) string { return "" }

// CSIDCloses: no, the library shifts the container (a uSID mid-container).
func (Kind) CSIDCloses(block any) bool { return false }

// CSIDNeedsFullSRH: the steering program and the library refuse a reduced
// SRH (Segments Left = Last Entry + 1), so a chain of several containers
// through a userspace service keeps the full SRH of containers.
func (Kind) CSIDNeedsFullSRH() bool { return true }

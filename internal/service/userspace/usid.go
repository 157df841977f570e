package userspace

// Compressed SIDs (docs/usid.md). A userspace service takes a uSID that
// ends its container: the packet then reaches it with the container
// consumed (DA block:uSID::) and a full SRH whose next entry is the next
// container, so the steering program and pkg/srv6svc's End (Segments
// Left − 1) serve it unchanged. The library does not shift containers
// itself (srv6svc.AdvanceContainer is there for a service that wants to).

// CSIDRefusal: every userspace service can take a uSID ("").
func (Kind) CSIDRefusal(block any, dir string) string { return "" }

// CSIDCloses: its uSID is the last of its container (the library applies
// End by Segments Left).
func (Kind) CSIDCloses(block any) bool { return true }

// CSIDNeedsFullSRH: the steering program and the library refuse a reduced
// SRH (Segments Left = Last Entry + 1).
func (Kind) CSIDNeedsFullSRH() bool { return true }

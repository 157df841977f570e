// Package offline is the seam between pkg/srv6svc and its test harness
// (srv6svctest): srv6svc sets Run at init, so the harness drives the
// library's own parsing and verdict code without sockets and without
// srv6svc exporting it.
package offline

import "net/netip"

// Result is what became of one frame.
type Result struct {
	Verdict  uint8  // the handler's verdict (0, Forward, when it did not run)
	Ran      bool   // the handler got the packet
	Out      []byte // the frame as sent, nil when dropped
	Dropped  string // why it was dropped: "verdict", "malformed: ...", "bad verdict"
	Modified bool   // the inner packet was marked modified
}

// Run processes frames as a worker does, in batches of batch: handler is
// an srv6svc.BatchHandler, Handler (batches of 1) or InnerFunc (End.ASM);
// csid is the binding's C-SID format {LBLen, NFLen} ({0, 0}: full SIDs).
var Run func(frames [][]byte, bound []netip.Prefix, csid [2]int, batch int, handler any) []Result

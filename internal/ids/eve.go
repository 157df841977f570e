package ids

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EVETimeFormat is Suricata's EVE timestamp layout.
const EVETimeFormat = "2006-01-02T15:04:05.000000-0700"

// EVE is one alert event, shaped like Suricata's EVE JSON "alert" record
// with an added "srv6" object.
type EVE struct {
	Timestamp string   `json:"timestamp"`
	EventType string   `json:"event_type"`
	SrcIP     string   `json:"src_ip"`
	SrcPort   *uint16  `json:"src_port,omitempty"`
	DestIP    string   `json:"dest_ip"`
	DestPort  *uint16  `json:"dest_port,omitempty"`
	Proto     string   `json:"proto"`
	ICMPType  *uint8   `json:"icmp_type,omitempty"`
	ICMPCode  *uint8   `json:"icmp_code,omitempty"`
	Alert     EVEAlert `json:"alert"`
	SRv6      *EVESRv6 `json:"srv6,omitempty"`
}

// EVEAlert is the "alert" object of an EVE record.
type EVEAlert struct {
	Action      string `json:"action"` // "allowed" or "blocked"
	GID         uint32 `json:"gid"`
	SignatureID uint32 `json:"signature_id"`
	Rev         uint32 `json:"rev"`
	Signature   string `json:"signature"`
	Category    string `json:"category"`
	Severity    int    `json:"severity"`
}

// EVESRv6 is the SRH metadata of the packet an alert is about.
type EVESRv6 struct {
	OuterSrc string `json:"outer_src,omitempty"`
	OuterDst string `json:"outer_dst,omitempty"`
	// Segments in SRH order: Segments[0] is the last segment of the path.
	Segments      []string `json:"segments"`
	SegmentsLeft  int      `json:"segments_left"`
	ActiveSegment string   `json:"active_segment,omitempty"`
	Args          uint64   `json:"args"`
	Tag           uint16   `json:"tag"`
}

// NewEVE builds the record of rule r firing on packet p (whose inner
// packet decoded into f).
func newEVE(p *Packet, f *flow, r *Rule, mode Mode) *EVE {
	ts := p.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	ev := &EVE{
		Timestamp: ts.Format(EVETimeFormat),
		EventType: "alert",
		SrcIP:     f.src.String(),
		DestIP:    f.dst.String(),
		Proto:     protoName(f.proto),
		Alert: EVEAlert{
			Action:      "allowed",
			GID:         r.GID,
			SignatureID: r.SID,
			Rev:         r.Rev,
			Signature:   r.Msg,
			Category:    r.Classtype,
			Severity:    r.Priority,
		},
	}
	if r.Action == ActionDrop && mode == ModeIPS {
		ev.Alert.Action = "blocked"
	}
	if f.hasL4 {
		switch f.class() {
		case classTCP, classUDP:
			sp, dp := f.sport, f.dport
			ev.SrcPort, ev.DestPort = &sp, &dp
		case classICMP4, classICMP6:
			t, c := f.icmpType, f.icmpCd
			ev.ICMPType, ev.ICMPCode = &t, &c
		}
	}
	if p.Segments != nil || p.OuterSrc.IsValid() {
		sr := &EVESRv6{
			OuterSrc:     addrString(p.OuterSrc),
			OuterDst:     addrString(p.OuterDst),
			Segments:     make([]string, len(p.Segments)),
			SegmentsLeft: p.SL,
			Args:         p.Args,
			Tag:          p.Tag,
		}
		for i, a := range p.Segments {
			sr.Segments[i] = a.String()
		}
		if p.SL >= 0 && p.SL < len(p.Segments) {
			sr.ActiveSegment = p.Segments[p.SL].String()
		}
		ev.SRv6 = sr
	}
	return ev
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// protoName spells a protocol number the way Suricata's EVE does.
func protoName(p uint8) string {
	switch p {
	case ipprotoTCP:
		return "TCP"
	case ipprotoUDP:
		return "UDP"
	case ipprotoICMP:
		return "ICMP"
	case ipprotoICMPv6:
		return "IPv6-ICMP"
	}
	return strconv.Itoa(int(p))
}

// eveWriter serialises alert lines from concurrent workers.
type eveWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    bytes.Buffer
	errors atomic.Uint64
}

func (w *eveWriter) write(p *Packet, f *flow, rules []*Rule, mode Mode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	for _, r := range rules {
		_ = enc.Encode(newEVE(p, f, r, mode)) // cannot fail: plain fields
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		w.errors.Add(1)
	}
}

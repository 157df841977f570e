package dump

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/srh"
)

// TestMalformedPartialFields: for every frame of the scapy capture whose
// SRH is malformed, the fields dump still shows (Segments Left, Last Entry,
// Tag, the segments it could read) are the ones tshark dissects, and the
// fault names the byte offset of the faulty field.
func TestMalformedPartialFields(t *testing.T) {
	c := goldenCapture(t)
	out, err := exec.Command("tshark", "-r", c.pcap(), "-T", "fields", "-E", "separator=;", "-E", "aggregator=,",
		"-e", "ipv6.routing.segleft", "-e", "ipv6.routing.srh.last_entry", "-e", "ipv6.routing.srh.tag",
		"-e", "ipv6.routing.srh.addr").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	src, err := OpenFile(c.pcap())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Where each fault must point (byte offset in the IPv6 packet).
	wantFault := map[string]string{
		"malformed-segleft":      "segments-left at byte 43 (srh +3 segments-left)",
		"malformed-tlv-overflow": "tlv-overflow at byte 64 (srh +24 tlvs)",
		"malformed-routing-type": "routing-type at byte 42 (srh +2 routing-type)",
		"malformed-hmac-len":     "bad-hmac-tlv at byte 64 (srh +24 tlvs)",
		"truncated-ipv6":         "truncated at byte 64: payload length",
	}
	var r Record
	checked := 0
	for i := 0; ; i++ {
		data, ci, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r.CapLen, r.OrigLen = ci.CapLen, ci.Len
		r.Decode(src.LinkType(), data)
		name := c.names[i]
		if want, ok := wantFault[name]; ok {
			line := string(appendFault(nil, &r.Pkt, r.Err))
			if !strings.Contains(line, want) {
				t.Errorf("%s: fault %q, want it to contain %q", name, line, want)
			}
		}
		s := r.Pkt.SRH
		if r.Err == nil || s == nil || s.RoutingType != srh.RoutingTypeSRH {
			continue
		}
		f := strings.Split(lines[i], ";")
		tag, err := strconv.ParseUint(strings.ReplaceAll(f[2], ":", ""), 16, 16)
		if err != nil {
			t.Fatalf("%s: tshark tag %q: %v", name, f[2], err)
		}
		var segs []string
		for _, a := range s.Segments { // wire order, as tshark lists them
			segs = append(segs, a.String())
		}
		tsSegs := strings.Split(f[3], ",")
		if len(tsSegs) > len(segs) { // tshark may show bytes past what the header holds
			tsSegs = tsSegs[:len(segs)]
		}
		ts := map[string]string{"sl": f[0], "le": f[1], "tag": strconv.FormatUint(tag, 10), "segs": strings.Join(tsSegs, ",")}
		ours := map[string]string{"sl": strconv.Itoa(int(s.SegmentsLeft)), "le": strconv.Itoa(int(s.LastEntry)),
			"tag": strconv.Itoa(int(s.Tag)), "segs": strings.Join(segs, ",")}
		if diff := cmp.Diff(ts, ours); diff != "" {
			t.Errorf("%s: partial SRH, tshark vs dump (-tshark +dump):\n%s", name, diff)
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("only %d malformed frames cross-checked", checked)
	}
}

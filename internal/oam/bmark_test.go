package oam

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nodestate"
)

// markState.same says whether a resync has anything to install: the
// same routes, rules and selectors, whatever order desired read the rules
// in and whatever their Seg6 pointers; a selector or an SRH that differs
// is a change.
func TestMarkStateSame(t *testing.T) {
	seg := func(oflag bool, segs ...string) *nodestate.Seg6Encap {
		e := &nodestate.Seg6Encap{Mode: "encap", OFlag: oflag}
		for _, s := range segs {
			e.Segs = append(e.Segs, netip.MustParseAddr(s))
		}
		return e
	}
	route := func(e *nodestate.Seg6Encap) nodestate.Route {
		return nodestate.Route{Dst: netip.MustParsePrefix("fc00:4d::/64"), Table: 0x2a001234, Dev: "eth-r1", Seg6: e}
	}
	rule := func(prio int, dport uint16) nodestate.Rule {
		return nodestate.Rule{Family: 6, Priority: prio, Dst: netip.MustParsePrefix("fc00:4d::/64"), IPProto: 17,
			Dport: nodestate.PortRange{From: dport}, Table: 0x2a001234, Proto: ProtoSample}
	}
	sel := func(prio uint32) boundary.SampleSel {
		return boundary.SampleSel{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Proto: 17, Slot: 1, Rate: 10, Mark: 0x2a011234, Prio: prio}
	}
	base := markState{
		routes: []nodestate.Route{route(seg(true, "fc00:2::1", "fc00:4::1"))},
		rules:  []nodestate.Rule{rule(99, 7000), rule(199, 8000)},
		marks:  []uint32{0x2a011234, 0x2a011234},
		sels:   []boundary.SampleSel{sel(100), sel(200)},
	}
	for _, tc := range []struct {
		name string
		o    markState
		want bool
	}{
		{"equal, other pointers", markState{
			routes: []nodestate.Route{route(seg(true, "fc00:2::1", "fc00:4::1"))},
			rules:  []nodestate.Rule{rule(99, 7000), rule(199, 8000)},
			marks:  []uint32{0x2a011234, 0x2a011234},
			sels:   []boundary.SampleSel{sel(100), sel(200)},
		}, true},
		{"rules read in another order", markState{
			routes: base.routes,
			rules:  []nodestate.Rule{rule(199, 8000), rule(99, 7000)},
			marks:  []uint32{0x2a011234, 0x2a011234},
			sels:   base.sels,
		}, true},
		{"another SID", markState{
			routes: []nodestate.Route{route(seg(true, "fc00:3::1", "fc00:4::1"))},
			rules:  base.rules, marks: base.marks, sels: base.sels,
		}, false},
		{"a rule's port", markState{
			routes: base.routes,
			rules:  []nodestate.Rule{rule(99, 7001), rule(199, 8000)},
			marks:  base.marks, sels: base.sels,
		}, false},
		{"a selector's priority", markState{
			routes: base.routes, rules: base.rules, marks: base.marks,
			sels: []boundary.SampleSel{sel(100), sel(201)},
		}, false},
		{"a rule fewer", markState{
			routes: base.routes, rules: base.rules[:1], marks: base.marks[:1], sels: base.sels,
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := base.same(tc.o); got != tc.want {
				t.Errorf("same = %v, want %v", got, tc.want)
			}
			if got := tc.o.same(base); got != tc.want {
				t.Errorf("same (reversed) = %v, want %v", got, tc.want)
			}
		})
	}
}

// nlMsg builds a notification of type typ whose body is hdr followed by
// the rtattrs attrs (type, value).
func nlMsg(typ uint16, hdr []byte, attrs ...[]byte) syscall.NetlinkMessage {
	b := append([]byte(nil), hdr...)
	for _, a := range attrs {
		l := unix.SizeofRtAttr + len(a) - 2
		at := make([]byte, (l+3)&^3)
		binary.NativeEndian.PutUint16(at, uint16(l))
		copy(at[2:], a) // a: the type's two bytes, then the value
		b = append(b, at...)
	}
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: typ}, Data: b}
}

func attr(typ uint16, v ...byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, typ)
	return append(b, v...)
}

// What triggers a resync: a route or rule added or deleted by anyone but
// boundary marking (protocol 205, its own changes: following them would
// loop), not a cached clone; other notifications do not.
func TestRouteNotificationTriggers(t *testing.T) {
	rtmsg := func(proto byte, flags uint32) []byte {
		b := []byte{unix.AF_INET6, 64, 0, 0, 254, proto, 0, unix.RTN_UNICAST}
		return binary.NativeEndian.AppendUint32(b, flags)
	}
	ruleHdr := []byte{unix.AF_INET6, 64, 0, 0, 0, 0, 0, unix.FR_ACT_TO_TBL, 0, 0, 0, 0}
	for _, tc := range []struct {
		name string
		m    syscall.NetlinkMessage
		want bool
	}{
		{"route by apply", nlMsg(unix.RTM_NEWROUTE, rtmsg(202, 0)), true},
		{"route deleted by ip", nlMsg(unix.RTM_DELROUTE, rtmsg(unix.RTPROT_BOOT, 0)), true},
		{"the marker's route", nlMsg(unix.RTM_NEWROUTE, rtmsg(ProtoSample, 0)), false},
		{"the marker's route deleted", nlMsg(unix.RTM_DELROUTE, rtmsg(ProtoSample, 0)), false},
		{"a cached clone", nlMsg(unix.RTM_NEWROUTE, rtmsg(unix.RTPROT_KERNEL, unix.RTM_F_CLONED)), false},
		{"rule by apply", nlMsg(unix.RTM_NEWRULE, ruleHdr, attr(unix.FRA_PRIORITY, 1, 0, 0, 0), attr(unix.FRA_PROTOCOL, 202)), true},
		{"rule without protocol", nlMsg(unix.RTM_DELRULE, ruleHdr, attr(unix.FRA_TABLE, 1, 0, 0, 0)), true},
		{"the marker's rule", nlMsg(unix.RTM_NEWRULE, ruleHdr, attr(unix.FRA_TABLE, 1, 0, 0, 0), attr(unix.FRA_PROTOCOL, ProtoSample)), false},
		{"the marker's rule deleted", nlMsg(unix.RTM_DELRULE, ruleHdr, attr(unix.FRA_PROTOCOL, ProtoSample)), false},
		{"an address", nlMsg(unix.RTM_NEWADDR, make([]byte, unix.SizeofIfAddrmsg)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rtTrigger(tc.m); got != tc.want {
				t.Errorf("rtTrigger = %v, want %v", got, tc.want)
			}
		})
	}
}

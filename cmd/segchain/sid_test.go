package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/testutil"
)

// fakeExt is an Extension keeping its SIDs in memory.
type fakeExt struct {
	sids    map[netip.Prefix]localsid.Entry
	cleared []string
}

func (f *fakeExt) Behaviors() []string { return []string{"End.AS", "End.AD"} }

func (f *fakeExt) Add(netns string, sid netip.Prefix, behavior string, params []string) error {
	m := map[string]string{}
	for i := 0; i+1 < len(params); i += 2 {
		m[params[i]] = params[i+1]
	}
	f.sids[sid] = localsid.Entry{SID: sid, Behavior: behavior, Params: m, Counters: map[string]uint64{"packets": 7}}
	return nil
}

func (f *fakeExt) Del(netns string, sid netip.Prefix) (bool, error) {
	_, ok := f.sids[sid]
	delete(f.sids, sid)
	return ok, nil
}

func (f *fakeExt) Show(netns string) ([]localsid.Entry, error) {
	var es []localsid.Entry
	for _, e := range f.sids {
		es = append(es, e)
	}
	return es, nil
}

func (f *fakeExt) Flush(netns string) error {
	f.sids = map[netip.Prefix]localsid.Entry{}
	return nil
}

func (f *fakeExt) ClearCounters(netns string, sid *netip.Prefix) error {
	s := "all"
	if sid != nil {
		s = sid.String()
	}
	f.cleared = append(f.cleared, s)
	return nil
}

// TestPrivilegedSidExtension checks that behaviours an extension claims go
// to it, and that show/del/flush/clear-counters merge its SIDs with the
// kernel's.
func TestPrivilegedSidExtension(t *testing.T) {
	ns := testutil.NewNetns(t, "sidx")
	testutil.Exec(t, ns, "ip", "link", "add", "xa", "type", "veth", "peer", "name", "xb")
	testutil.Exec(t, ns, "ip", "link", "set", "xa", "up")
	ext := &fakeExt{sids: map[netip.Prefix]localsid.Entry{}}
	run := func(args ...string) (string, error) {
		cmd := newSidCmd(ext)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--netns", ns}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	steps := []struct {
		args    string
		want    string
		wantErr bool
	}{
		{"add fc00:5::1 end.as oif xa iif xb nh4 10.0.0.2", "added fc00:5::1/128 End.AS", false},
		{"add fc00:5::2 End", "added fc00:5::2 End\n", false},
		{"show", "fc00:5::1 End.AS nh4 10.0.0.2 iif xb oif xa packets 7\nfc00:5::2 End packets 0 bytes 0 errors 0\n", false},
		{"show fc00:5::1 -o json", `"behavior": "End.AS"`, false},
		{"clear-counters fc00:5::1", "cleared counters of fc00:5::1/128", false},
		{"del fc00:5::1", "deleted fc00:5::1/128", false},
		{"del fc00:5::1", "", true},
		{"add fc00:5::3 End.AD oif xa", "added fc00:5::3/128 End.AD", false},
		{"flush", "flushed 2 local SID(s)", false},
		{"show", "", false},
	}
	for _, s := range steps {
		out, err := run(strings.Fields(s.args)...)
		if (err != nil) != s.wantErr {
			t.Fatalf("sid %s: err = %v, want error %v (%s)", s.args, err, s.wantErr, out)
		}
		if !strings.Contains(out, s.want) || (s.args == "show" && s.want == "" && out != "") {
			t.Errorf("sid %s: output %q, want it to contain %q", s.args, out, s.want)
		}
	}
	if diff := cmp.Diff([]string{"fc00:5::1/128"}, ext.cleared); diff != "" {
		t.Errorf("extension ClearCounters calls (-want +got):\n%s", diff)
	}
}

// TestPrivilegedSidAddWithoutDev: `sid add` without dev follows apply's
// rule, a local route on lo, so the SID does not depend on an interface
// (before, it was bound to the first interface that was up and vanished
// when that interface went down).
func TestPrivilegedSidAddWithoutDev(t *testing.T) {
	ns := testutil.NewNetns(t, "sidd")
	testutil.Exec(t, ns, "ip", "link", "add", "xa", "type", "veth", "peer", "name", "xb")
	testutil.Exec(t, ns, "ip", "link", "set", "xa", "up")
	run := func(args ...string) string {
		t.Helper()
		cmd := newSidCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--netns", ns}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("sid %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := run("add", "fc00:5::2", "End"); !strings.HasPrefix(out, "added fc00:5::2 End\n") {
		t.Errorf("add: %q, want no dev", out)
	}
	routes := testutil.Exec(t, ns, "ip", "-6", "route", "show", "table", "all", "fc00:5::2")
	if !strings.Contains(routes, "local fc00:5::2 ") || !strings.Contains(routes, "dev lo") {
		t.Errorf("SID route is not a local route on lo:\n%s", routes)
	}
	testutil.Exec(t, ns, "ip", "link", "set", "xa", "down")
	if out := run("show"); !strings.Contains(out, "fc00:5::2 End ") {
		t.Errorf("SID gone after an interface went down:\n%s", out)
	}
}

func TestDetailLine(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]uint64
		want string
	}{
		{nil, ""},
		{map[string]uint64{"in-packets": 10, "out-packets": 9, "in-drops": 0, "out-drops": 1, "drop-cache-empty": 1, "drop-mtu": 0},
			"in 10 out 9 drops in 0 out 1: cache-empty 1"},
		{map[string]uint64{"drop-rule": 3, "drop-policy": 2}, "drops: policy 2, rule 3"},
		{map[string]uint64{"in-packets": 10, "out-packets": 4, "not-returned": 6, "in-drops": 0, "out-drops": 0},
			"in 10 out 4 not-returned 6 drops in 0 out 0"},
	} {
		if got := detailLine(tc.in); got != tc.want {
			t.Errorf("detailLine(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A userspace SID's status line shows its XDP mode, with a generic
// fallback's reason, its AF_XDP mode and MTU (issue 26: a fallback must
// not be silent); other behaviours have none.
func TestServeMode(t *testing.T) {
	route := "fc00:3::40 userspace name ids state serving on-failure bypass queues 1 serve batch mtu 3506<9000 xdp eth-r1:generic(mtu9000>3506),s6svc0k:native xsk copy fwd fib packets 5 bytes 500"
	want := "mode: mtu 3506<9000 xdp eth-r1:generic(mtu9000>3506),s6svc0k:native xsk copy fwd fib"
	if got := serveMode("userspace", route); got != want {
		t.Errorf("serveMode = %q, want %q", got, want)
	}
	if got := serveMode("End", "fc00:3::1 End packets 1"); got != "" {
		t.Errorf("serveMode of End = %q, want none", got)
	}
}

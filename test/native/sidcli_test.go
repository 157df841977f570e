package native

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// sidView is the part of a `sid show -o json` entry the CLI test compares.
type sidView struct {
	SID, Behavior string
	Params        map[string]string
	Segchain      bool
	HasCounters   bool
}

func viewOf(t *testing.T, ns string) []sidView {
	t.Helper()
	var out []sidView
	for _, e := range showJSON(t, ns) {
		extra, _ := e.Extra.(map[string]any)
		seg, _ := extra["segchain"].(bool)
		p := e.Params
		if len(p) == 0 {
			p = nil
		}
		out = append(out, sidView{SID: e.SID.String(), Behavior: e.Behavior, Params: p, Segchain: seg, HasCounters: e.Counters != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SID < out[j].SID })
	return out
}

// ipSIDs lists the seg6local routes of ns with iproute2, the oracle for
// what `segchain sid` installed: "DST ACTION proto P".
func ipSIDs(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	// table all: SIDs without a device are local routes, which a plain
	// show hides.
	for _, l := range strings.Split(testutil.Exec(t, "", "ip", "-n", ns, "-6", "route", "show", "table", "all"), "\n") {
		f := strings.Fields(strings.TrimPrefix(l, "local "))
		if len(f) < 5 || f[1] != "encap" || f[2] != "seg6local" {
			continue
		}
		proto := ""
		for i := range f {
			if f[i] == "proto" && i+1 < len(f) {
				proto = f[i+1]
			}
		}
		out = append(out, f[0]+" "+f[4]+" proto "+proto)
	}
	sort.Strings(out)
	return out
}

func TestPrivilegedSidCLI(t *testing.T) {
	requireNative(t)
	ns := testutil.NewNetns(t, "sid")
	testutil.Exec(t, "", "ip", "-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb")
	testutil.Exec(t, "", "ip", "-n", ns, "link", "set", "va", "up")
	testutil.Exec(t, "", "ip", "-n", ns, "link", "set", "vb", "up")
	// A SID segchain did not install: show must mark it, flush must keep it.
	testutil.Exec(t, "", "ip", "-n", ns, "-6", "route", "add", "fc00:9::1", "encap", "seg6local", "action", "End", "dev", "va", "proto", "static")
	// Without `dev`, a SID is a local route on lo (as apply installs it):
	// no dev is shown.

	steps := []struct {
		name    string
		viaExec bool
		args    string
		wantOut string // substring of the output
		wantErr bool
	}{
		{"add End in the current netns", true, "add fc00:2::1 End", "added fc00:2::1 End\n", false},
		{"add End.X with --netns", false, "add fc00:2::2 end.x nh6 fc00::9 oif vb", "added fc00:2::2 End.X nh6 fc00::9 oif vb", false},
		{"add End.DT6 prefix nocount", false, "add fc00:3::/64 End.DT6 table main nocount dev vb", "added fc00:3::/64 End.DT6 table main dev vb", false},
		{"add End.B6.Encaps", true, "add fc00:2::4 End.B6.Encaps segs fc00::a,fc00::b", "segs fc00::a,fc00::b", false},
		{"add existing fails", false, "add fc00:2::1 End", "already exists", true},
		{"missing param", false, "add fc00:2::5 End.DX6", "End.DX6 requires nh6", true},
		{"param of another behaviour", false, "add fc00:2::5 End.X nh6 fc00::1 table 5", "table is not a parameter of End.X", true},
		{"unknown behaviour", false, "add fc00:2::5 End.NOPE", "unknown behaviour", true},
		{"show marks foreign SIDs", false, "show", "fc00:9::1 End dev va  [proto static: not installed by segchain]", false},
		{"show one SID", true, "show fc00:2::2", "fc00:2::2 End.X nh6 fc00::9 oif vb packets 0 bytes 0 errors 0", false},
		{"show unknown SID", false, "show fc00:2::99", "not found", true},
		{"del", false, "del fc00:2::2", "deleted fc00:2::2/128", false},
		{"del again", false, "del fc00:2::2", "not found", true},
		{"del of a foreign SID is refused", true, "del fc00:9::1", "not installed by segchain (route protocol static)", true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, err := sid(ns, s.viaExec, strings.Fields(s.args)...)
			if (err != nil) != s.wantErr {
				t.Fatalf("sid %s: err = %v, want error %v\n%s", s.args, err, s.wantErr, out)
			}
			if !strings.Contains(out, s.wantOut) {
				t.Errorf("sid %s: output %q does not contain %q", s.args, out, s.wantOut)
			}
		})
	}

	t.Run("state in the kernel", func(t *testing.T) {
		m := fmt.Sprint(nodestate.ProtoManual) // unnamed in rt_protos: ip prints the number
		want := []string{"fc00:2::1 End proto " + m, "fc00:2::4 End.B6.Encaps proto " + m, "fc00:3::/64 End.DT6 proto " + m, "fc00:9::1 End proto static"}
		if diff := cmp.Diff(want, ipSIDs(t, ns)); diff != "" {
			t.Errorf("ip -6 route (-want +got):\n%s", diff)
		}
		wantView := []sidView{
			{SID: "fc00:2::1/128", Behavior: "End", Segchain: true, HasCounters: true},
			{SID: "fc00:2::4/128", Behavior: "End.B6.Encaps", Params: map[string]string{"segs": "fc00::a,fc00::b"}, Segchain: true, HasCounters: true},
			{SID: "fc00:3::/64", Behavior: "End.DT6", Params: map[string]string{"table": "main"}, Segchain: true},
			{SID: "fc00:9::1/128", Behavior: "End", Segchain: false},
		}
		if diff := cmp.Diff(wantView, viewOf(t, ns)); diff != "" {
			t.Errorf("sid show -o json (-want +got):\n%s", diff)
		}
	})

	t.Run("counters and clear-counters", func(t *testing.T) {
		// Packets for fc00:2::1 enter on va (sent from its peer vb). With
		// Segments Left 0 End must drop them and count errors; with SL 1
		// toward an unreachable SID too. Neither reaches "packets".
		sc := startScapy(t, ns)
		vaMAC, vbMAC := linkMAC(t, ns, "va"), linkMAC(t, ns, "vb")
		bad := v6("fc00:12::1", "fc00:2::1", 64) + "/" + srh(q("fc00:2::1"), 0, "") + "/" + udp + "/" + payload("sl0")
		sc.send(t, "vb", vbMAC, vaMAC, bad, 2)
		es := showJSON(t, ns, "fc00:2::1")
		if len(es) != 1 {
			t.Fatalf("show fc00:2::1: %d entries", len(es))
		}
		if diff := cmp.Diff(map[string]uint64{"packets": 0, "bytes": 0, "errors": 2}, es[0].Counters); diff != "" {
			t.Errorf("counters after 2 packets with SL 0 (-want +got):\n%s", diff)
		}
		if p, b, e := ipRouteCounters(t, ns, "fc00:2::1/128"); p != 0 || b != 0 || e != 2 {
			t.Errorf("iproute2 counters = %d/%d/%d, want 0/0/2", p, b, e)
		}
		mustSid(t, ns, true, "clear-counters", "fc00:2::1")
		checkCounters(t, ns, "fc00:2::1/128", 0, 0, 0)
		if _, err := sid(ns, false, "clear-counters", "fc00:2::77"); err == nil {
			t.Errorf("clear-counters of an unknown SID succeeded")
		}
	})

	t.Run("flush keeps foreign SIDs", func(t *testing.T) {
		out := mustSid(t, ns, true, "flush")
		if !strings.Contains(out, "flushed 3 local SID(s)") {
			t.Errorf("flush said %q, want 3 SIDs flushed", out)
		}
		if diff := cmp.Diff([]string{"fc00:9::1 End proto static"}, ipSIDs(t, ns)); diff != "" {
			t.Errorf("after flush, ip -6 route (-want +got):\n%s", diff)
		}
	})
}

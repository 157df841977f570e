package localsid

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/testutil"
)

// allSupported is a kernel probe that found every feature.
func allSupported() dataplane.Features {
	f := dataplane.Features{}
	for _, p := range []struct {
		ft   *dataplane.Feature
		name string
	}{{&f.VRF, "vrf"}, {&f.EndDT4, "End.DT4"}, {&f.EndDT46, "End.DT46"}, {&f.VRFTable, "vrftable"},
		{&f.Counters, "count"}, {&f.FlavorPSP, "flavor psp"}, {&f.FlavorNextCSID, "flavor next-csid"},
		{&f.EndBPF, "End.BPF"}, {&f.HMAC, "seg6 hmac"}, {&f.L2Encap, "mode l2encap"},
		{&f.EncapRed, "mode encap.red"}, {&f.L2EncapRed, "mode l2encap.red"}} {
		*p.ft = dataplane.Feature{Name: p.name, Supported: true}
	}
	return f
}

// TestPrivilegedAddFeatureCheck: sid add refuses a SID whose behaviour,
// counters, HMAC or flavor the kernel lacks, before touching the node and
// in the sentence apply's preflight uses (dataplane.Features.Explain).
// Before, sid add had its own check that skipped counters (on by default)
// and HMAC, so such a SID reached the kernel and failed with its EINVAL.
func TestPrivilegedAddFeatureCheck(t *testing.T) {
	ns := testutil.NewNetns(t, "lsidf")
	lack := func(pick func(*dataplane.Features) *dataplane.Feature, reason string) dataplane.Features {
		f := allSupported()
		ft := pick(&f)
		ft.Supported, ft.Reason = false, reason
		return f
	}
	tests := []struct {
		name      string
		args      string
		features  dataplane.Features
		wantErr   string // "" = added
		wantProbe bool
	}{
		{"End nocount needs nothing probed", "fc00:5::1 End nocount", dataplane.Features{}, "", false},
		{"End.DT6 table needs nothing probed", "fc00:5::2 End.DT6 table 10 nocount", dataplane.Features{}, "", false},
		{"counters supported", "fc00:5::3 End", allSupported(), "", true},
		{"counters lacking", "fc00:5::4 End",
			lack(func(f *dataplane.Features) *dataplane.Feature { return &f.Counters }, "kernel rejected fc00::1 End count: invalid argument"),
			"End at fc00:5::4/128: the kernel of node nfv1 cannot do it (count: the kernel said: invalid argument: not supported by this kernel)", true},
		{"hmac lacking", "fc00:5::5 End.B6 segs fc00::a hmac 7 nocount",
			lack(func(f *dataplane.Features) *dataplane.Feature { return &f.HMAC }, "no hmac"),
			"End.B6 at fc00:5::5/128: the kernel of node nfv1 cannot do it (seg6 hmac: no hmac: not supported by this kernel)", true},
		{"next-csid lacking", "fc00:5::6 End flavors next-csid nocount",
			lack(func(f *dataplane.Features) *dataplane.Feature { return &f.FlavorNextCSID }, "EINVAL"),
			"End at fc00:5::6/128: the kernel of node nfv1 cannot do it (flavor next-csid: EINVAL: not supported by this kernel)", true},
		{"usp never", "fc00:5::7 End flavors usp nocount", allSupported(),
			"End at fc00:5::7/128: the kernel of node nfv1 cannot do it (flavor usp: no seg6local behaviour implements it: not supported by this kernel)", true},
		{"End.DT4 names VRF", "fc00:5::8 End.DT4 vrftable 10 nocount",
			lack(func(f *dataplane.Features) *dataplane.Feature { return &f.VRF }, "no vrf link kind"),
			"End.DT4 at fc00:5::8/128: needs VRF devices, which the kernel of node nfv1 lacks (no vrf link kind)", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probed := false
			m := &Manager{Netns: ns, NodeName: "nfv1", features: func(*dataplane.Handle) dataplane.Features {
				probed = true
				return tt.features
			}}
			args := strings.Fields(tt.args)
			_, err := m.Add(context.Background(), args)
			if probed != tt.wantProbe {
				t.Errorf("probed = %v, want %v", probed, tt.wantProbe)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Add(%q) = %v, want nil", tt.args, err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Add(%q) = %v,\nwant %s", tt.args, err, tt.wantErr)
			}
			if !errors.Is(err, dataplane.ErrNotSupported) {
				t.Errorf("Add(%q) = %v, does not wrap ErrNotSupported", tt.args, err)
			}
			// apply's preflight says the same of the same route.
			r, perr := Parse(args)
			if perr != nil {
				t.Fatal(perr)
			}
			if want := tt.features.Explain(r, "nfv1"); want == nil || want.Error() != err.Error() {
				t.Errorf("Add says %q, apply's preflight %v", err, want)
			}
			if out := testutil.Exec(t, ns, "ip", "-6", "route", "show", "table", "all", args[0]); strings.TrimSpace(out) != "" {
				t.Errorf("refused SID installed anyway:\n%s", out)
			}
		})
	}
}

// TestPrivilegedOwnership: del and flush remove hand-made SIDs only; the
// domain's (apply's protocol) and another tool's are refused by del, kept
// by flush, and show marks who owns each.
func TestPrivilegedOwnership(t *testing.T) {
	ns := testutil.NewNetns(t, "lsido")
	testutil.Exec(t, ns, "ip", "link", "set", "lo", "up")
	ctx := context.Background()
	m := &Manager{Netns: ns}
	for _, sid := range []string{"fc00:6::1", "fc00:6::2"} {
		if _, err := m.Add(ctx, []string{sid, "End", "nocount"}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "local", "fc00:6::a", "encap", "seg6local", "action", "End", "dev", "lo", "proto", "202")
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "local", "fc00:6::b", "encap", "seg6local", "action", "End", "dev", "lo", "proto", "static")

	for _, tc := range []struct{ sid, wantErr string }{
		{"fc00:6::a/128", "sid fc00:6::a/128 belongs to the domain (installed by segchain apply): remove it from the domain file and apply, or segchain destroy"},
		{"fc00:6::b/128", "sid fc00:6::b/128 was not installed by segchain (route protocol static): remove it with ip -6 route del"},
		{"fc00:6::c/128", "sid fc00:6::c/128 not found in netns " + ns},
		{"fc00:6::1/128", ""},
	} {
		err := m.Del(ctx, netip.MustParsePrefix(tc.sid))
		if got := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
			t.Errorf("Del(%s) = %v, want %q", tc.sid, err, tc.wantErr)
		}
	}
	rows, err := m.Show(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Text)
	}
	want := []string{
		"fc00:6::2 End",
		"fc00:6::a End  [domain: installed by segchain apply]",
		"fc00:6::b End  [proto static: not installed by segchain]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Show (-want +got):\n%s", diff)
	}
	if n, err := m.Flush(ctx); err != nil || n != 1 {
		t.Errorf("Flush = %d, %v; want 1 (the hand-made one only)", n, err)
	}
	if rows, err = m.Show(ctx, nil); err != nil || len(rows) != 2 {
		t.Errorf("after Flush: %d SIDs, %v; want the domain's and the static one", len(rows), err)
	}
}

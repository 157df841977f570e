package dataplane

import (
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

func TestPrivilegedProbe(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "dpp")
	h := openT(t, ns)
	f := h.Probe()
	for _, x := range f.List() {
		t.Logf("%-18s supported=%-5v %s", x.Name, x.Supported, x.Reason)
	}
	// Independent oracle: can iproute2 create a vrf device in a scratch namespace?
	scratch := testutil.NewNetns(t, "dpv")
	_, vrfErr := testutil.ExecErr(scratch, "ip", "link", "add", "x", "type", "vrf", "table", "10")
	if got, want := f.VRF.Supported, vrfErr == nil; got != want {
		t.Errorf("Probe VRF supported = %v, ip link add type vrf worked = %v", got, want)
	}
	for _, x := range []Feature{f.VRF, f.EndDT4, f.EndDT46, f.VRFTable} {
		if !x.Supported && x.Reason == "" {
			t.Errorf("%s unsupported without a reason", x.Name)
		}
		if f.VRF.Supported != x.Supported {
			t.Errorf("%s supported=%v but vrf supported=%v", x.Name, x.Supported, f.VRF.Supported)
		}
	}
	// Probe must not touch the handle's namespace.
	if rs, err := h.Routes(); err != nil || len(rs) != 0 {
		t.Errorf("Probe left routes in the handle namespace: %v %v", rs, err)
	}
}

func openT(t *testing.T, ns string) *Handle {
	t.Helper()
	h, err := Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

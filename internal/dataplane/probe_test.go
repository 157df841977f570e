package dataplane

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/segchain/segchain/internal/nsutil"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"

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

func TestPrivilegedOpen(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "dpo")
	h := openT(t, ns)
	if h.Netns() != ns {
		t.Errorf("Netns() = %q, want %q", h.Netns(), ns)
	}
	// Sockets belong to the namespace: a route added through the handle is
	// visible to ip in that namespace only.
	testutil.Exec(t, ns, "ip", "link", "add", "o0", "type", "veth", "peer", "name", "o1")
	testutil.Exec(t, ns, "ip", "link", "set", "o0", "up")
	r := nodestate.Route{Dst: netip.MustParsePrefix("fc00:42::/64"), Dev: "o0"}
	if err := h.ReplaceRoute(r); err != nil {
		t.Fatal(err)
	}
	if out := testutil.Exec(t, ns, "ip", "-N", "-6", "route", "show", "fc00:42::/64"); !strings.Contains(out, fmt.Sprintf("dev o0 proto %d", nodestate.Proto)) {
		t.Errorf("route not in %s: %q", ns, out)
	}
	if _, err := Open("sct-does-not-exist-42"); err == nil {
		t.Error("Open of a missing namespace succeeded")
	}
	h.Close()
	h.Close() // idempotent
}

// TestPrivilegedOrphanProbeRemoved: a probe namespace whose creator died
// (SIGKILL skips its deferred delete) is removed by the next probe; one of a
// live process is left alone.
func TestPrivilegedOrphanProbeRemoved(t *testing.T) {
	testutil.RequireRoot(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := fmt.Sprintf("%s%d-test", probePrefix, dead.Process.Pid)
	live := fmt.Sprintf("%s%d-test", probePrefix, os.Getpid())
	for _, n := range []string{orphan, live} {
		if err := nsutil.Create(n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nsutil.Delete(n) })
	}
	removeOrphanProbes()
	if nsutil.Exists(orphan) {
		t.Errorf("orphan probe namespace %s left", orphan)
	}
	if !nsutil.Exists(live) {
		t.Errorf("probe namespace %s of a live process removed", live)
	}
}

package firewall

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestNodeLifecycle: Apply pins maps and attaches to every interface,
// List reports the instance, Remove of the last instance leaves nothing; a
// deleted namespace's state is collected by the next user.
func TestNodeLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "fwn")
	testutil.Exec(t, ns, "ip", "link", "add", "fa", "type", "veth", "peer", "name", "fb")
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	rules := mustRules(t, fwrule.IPv6, "-p tcp --dport 22 -j DROP", "-m srh --srh-tag 7 -j SEG6 --seg6-action go-last")
	if err := Apply(ns, Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Remove(ns, sid) })
	name, err := nsName(ns, false)
	if err != nil {
		t.Fatal(err)
	}
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, name, "fw")
	pins, _ := filepath.Glob(filepath.Join(dir, "tcx-*"))
	if len(pins) != 2 {
		t.Errorf("tcx links pinned: %v, want fa and fb", pins)
	}
	for _, p := range pins {
		lk, err := link.LoadPinnedLink(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := lk.Info()
		lk.Close()
		if err != nil || info.TCX() == nil || info.TCX().Ifindex == 0 {
			t.Errorf("%s: not a live TCX link: %+v %v", p, info, err)
		}
	}
	sts, err := List(ns)
	if err != nil || len(sts) != 1 {
		t.Fatalf("List: %v %v", sts, err)
	}
	if got := sts[0]; got.Instance.SID != sid || len(got.Rules) != 2 || got.Rules[1].Rule != rules[1].String() || got.Instance.ArgsBits != 16 {
		t.Errorf("List: %+v", got)
	}
	// A second instance and an update of the first.
	sid2 := netip.MustParsePrefix("fc00:2::f2:0/112")
	if err := Apply(ns, Instance{SID: sid2, Policy: fwrule.Drop}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ns, Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Drop, Rules: rules[:1]}); err != nil {
		t.Fatal(err)
	}
	if in, ok, err := Get(ns, sid); err != nil || !ok || len(in.Rules) != 1 || in.Policy != fwrule.Drop {
		t.Errorf("Get after update: %+v %v %v", in, ok, err)
	}
	if found, err := Remove(ns, sid2); err != nil || !found {
		t.Fatalf("Remove %s: %v %v", sid2, found, err)
	}
	if found, err := Remove(ns, sid2); err != nil || found {
		t.Errorf("Remove again: %v %v", found, err)
	}
	if found, err := Remove(ns, sid); err != nil || !found {
		t.Fatalf("Remove %s: %v %v", sid, found, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
	if sts, err := List(ns); err != nil || len(sts) != 0 {
		t.Errorf("List after removal: %v %v", sts, err)
	}
}

func TestNodeGCDeletedNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.UniqueName("sct-fwg-")
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = nsutil.Delete(ns)
		}
	})
	testutil.Exec(t, ns, "ip", "link", "add", "fa", "type", "veth", "peer", "name", "fb")
	if err := Apply(ns, Instance{SID: netip.MustParsePrefix("fc00:9::/64"), Policy: fwrule.Accept}); err != nil {
		t.Fatal(err)
	}
	name, err := nsName(ns, false)
	if err != nil {
		t.Fatal(err)
	}
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, name, "fw")
	if err := nsutil.Delete(ns); err != nil {
		t.Fatal(err)
	}
	deleted = true
	// The next firewall user anywhere collects it — once the kernel has
	// really dismantled the namespace: that runs asynchronously (cleanup_net
	// from a workqueue), so its veth may outlive `ip netns del` briefly.
	other := testutil.NewNetns(t, "fwh")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := nsName(other, true); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) || time.Now().After(deadline) {
			break
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state of the deleted namespace left in %s", dir)
		_ = (&Node{dir: dir, state: filepath.Join(StateRoot, name)}).teardown()
	}
}

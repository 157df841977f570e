package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

const mbbFile = "testdata/mbb.yaml"

// mbbVariant is testdata/mbb.yaml with old replaced by new (once).
func mbbVariant(t *testing.T, old, new string) *config.Domain {
	t.Helper()
	src, err := os.ReadFile(mbbFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), old) {
		t.Fatalf("%s has no %q", mbbFile, old)
	}
	d, err := config.Parse([]byte(strings.Replace(string(src), old, new, 1)), filepath.Dir(mbbFile))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// setupMBB brings up the lab of testdata/mbb.yaml.
func setupMBB(t *testing.T) *env {
	t.Helper()
	testutil.RequireTool(t, "python3")
	e := setup(t, mbbFile)
	nfv1 := e.NS("nfv1")
	t.Cleanup(func() { _ = srunaware.Remove(nfv1) })
	return e
}

// flapSF takes the SF's interface down and up: the kernel deletes the
// SF's route back to the srunaware.
func flapSF(t *testing.T, e *env) {
	t.Helper()
	testutil.Exec(t, e.NS("sf1"), "ip", "link", "set", "eth-nfv1", "down")
	testutil.Exec(t, e.NS("sf1"), "ip", "link", "set", "eth-nfv1", "up")
}

// applyDuring streams through the chain and applies d while the stream
// flows; it returns the stream's count and the apply error.
func (e *env) applyDuring(t *testing.T, d *config.Domain) (streamResult, error) {
	t.Helper()
	var applyErr error
	r := stream(t, e, 7100, 1000, 500, func() {
		e.d, e.ctl = d, e.Session(d)
		_, applyErr = e.ctl.Apply(context.Background())
	})
	return r, applyErr
}

// TestProxySIDChangeUnderStream moves the proxy of a chain to a new SID
// (its function changes) while traffic flows, then to another SID and
// another type at once: the new SID takes over the IFACE-IN from the old
// one in one apply (before, the apply failed with "iif eth-sf1 is already
// the IFACE-IN of ..." and rolled back), no packet is lost, and the result
// is exactly the domain (the next apply changes nothing: an End.AS that
// inherited a learned cache gets its configured CACHE back).
func TestProxySIDChangeUnderStream(t *testing.T) {
	e := setupMBB(t)
	e.apply()
	for _, tc := range []struct{ name, old, new string }{
		{"new SID", `function: "0x21"`, `function: "0x22"`},
		{"new SID and static", "function: \"0x21\"\n    proxy: dynamic", "function: \"0x23\"\n    proxy: static"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldSID := e.sid("nfv1-px")
			r, err := e.applyDuring(t, mbbVariant(t, tc.old, tc.new))
			if err != nil {
				t.Fatalf("apply moving the proxy to a new SID: %v", err)
			}
			if r.Lost != 0 || r.Unique != r.Sent || r.Duplicates != 0 {
				t.Errorf("%d sent during the SID change: %d arrived (%d lost), %d duplicated", r.Sent, r.Unique, r.Lost, r.Duplicates)
			}
			sts, err := srunaware.Extension{}.Show(e.NS("nfv1"))
			if err != nil {
				t.Fatal(err)
			}
			if newSID := e.sid("nfv1-px"); len(sts) != 1 || sts[0].SID.Addr() != newSID || newSID == oldSID {
				t.Errorf("proxies after the change: %v, want only %s (was %s)", sts, newSID, oldSID)
			}
			if res := e.apply(); res.Changes() != 0 {
				t.Errorf("apply after the change made %d changes: %+v", res.Changes(), res.Diffs)
			}
			if r := stream(t, e, 7100, 200, 500, nil); r.Unique != 200 {
				t.Errorf("after the change: %d of 200 arrived", r.Unique)
			}
		})
	}
}

// TestProxyTypeChangeUnderStream walks the proxy of a chain through every
// type and back while traffic flows: each change is made in place and
// loses no packet (before, each one deleted the proxy and re-added it:
// about 100 ms of traffic lost).
func TestProxyTypeChangeUnderStream(t *testing.T) {
	e := setupMBB(t)
	e.apply()
	const dynamic = "proxy: dynamic\n    inner: ipv6\n"
	for _, tc := range []struct{ name, yaml string }{
		{"static", "proxy: static\n    inner: ipv6\n"},
		{"dynamic-flow", "proxy: dynamic-flow\n    inner: ipv6\n    flow_timeout: 30\n"},
		{"dynamic-flow max", "proxy: dynamic-flow\n    inner: ipv6\n    flow_timeout: 60\n    flow_max: 100\n"},
		{"masquerading", "proxy: masquerading\n"},
		{"dynamic", dynamic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.applyDuring(t, mbbVariant(t, dynamic, tc.yaml))
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if r.Lost != 0 || r.Unique != r.Sent || r.Duplicates != 0 {
				t.Errorf("%d sent during the change: %d arrived (%d lost), %d duplicated", r.Sent, r.Unique, r.Lost, r.Duplicates)
			}
		})
	}
}

// TestSFLinkFlapFlagsChain takes the SF's link down and up: the kernel
// drops the SF's route back to the proxy, and the chain's traffic is
// black-holed until the next apply. status must name the chain and the
// missing route (before, it only counted a pending change on sf1), and
// apply restores the traffic.
func TestSFLinkFlapFlagsChain(t *testing.T) {
	e := setupMBB(t)
	e.apply()
	if st := e.ctl.Status(context.Background()); len(st.Broken) != 0 {
		t.Fatalf("broken chains right after apply: %v", st.Broken)
	}
	flapSF(t, e)
	st := e.ctl.Status(context.Background())
	var found bool
	for _, b := range st.Broken {
		t.Log(b)
		if b.Chain == "probe" && b.Node == "sf1" && strings.Contains(strings.Join(b.Missing, ","), "route ::/0") {
			found = true
		}
	}
	if !found {
		t.Errorf("status does not flag chain probe for the route sf1 lost: %+v", st.Broken)
	}
	e.apply()
	if st := e.ctl.Status(context.Background()); len(st.Broken) != 0 {
		t.Errorf("broken chains after the repairing apply: %v", st.Broken)
	}
	if r := stream(t, e, 7100, 200, 500, nil); r.Unique != 200 {
		t.Errorf("after apply: %d of 200 arrived", r.Unique)
	}
}

// TestSFLinkFlapRepairedByWatch: with controller.Watch (segchain watch)
// running, the route the SF loses when its link goes down and up is put
// back without anybody running apply, and the chain carries traffic again.
func TestSFLinkFlapRepairedByWatch(t *testing.T) {
	e := setupMBB(t)
	ctx, cancel := context.WithCancel(context.Background())
	type report struct {
		trigger []string
		changes int
		err     error
	}
	reports := make(chan report, 16)
	done := make(chan error, 1)
	go func() {
		done <- e.ctl.Watch(ctx, func(trigger []string, res *controller.Result, err error) {
			r := report{trigger: trigger, err: err}
			if res != nil {
				r.changes = res.Changes()
			}
			reports <- r
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() report {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case err := <-done:
			t.Fatalf("watch ended: %v", err)
		case <-time.After(60 * time.Second): // a bound on a hang, not a timing check
			t.Fatal("no apply from watch")
		}
		return report{}
	}
	if r := next(); r.err != nil || r.changes == 0 {
		t.Fatalf("initial apply: %d changes, %v", r.changes, r.err)
	}
	flapSF(t, e)
	for {
		r := next()
		if r.err != nil {
			t.Fatalf("re-apply after %v: %v", r.trigger, r.err)
		}
		t.Logf("watch re-applied after %v: %d change(s)", r.trigger, r.changes)
		if st := e.ctl.Status(ctx); len(st.Broken) == 0 {
			break
		}
	}
	if r := stream(t, e, 7100, 200, 500, nil); r.Unique != 200 {
		t.Errorf("after the flap: %d of 200 arrived", r.Unique)
	}
}

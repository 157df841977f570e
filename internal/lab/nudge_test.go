package lab

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/bgp"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// A router whose connect timer towards a leaf is long (frr.Render:
// frr.SpeakerConnectRetry for a GoBGP neighbour) opens the session once
// the leaf's passive speaker appears and the Nudger tells it: real FRR in
// one namespace, the leaf's speaker as an agent group runs it (passive,
// bgp.NewShared) in another. The router's connect timer is raised to
// FRR's largest (65535 s) so that only the nudge can open the session
// within the test (the delay is logged, not asserted: the benchmark
// measures it). Then the nudge of an established session leaves it
// alone when asked again (not reset: asked for nothing, its uptime goes
// on).
//
// Fails without the Nudger's request (the router waits out its timer),
// and when RetryNow clears every session it is given.
func TestPrivilegedNudgeOpensPassiveSession(t *testing.T) {
	testutil.RequirePrivileged(t)
	if err := frr.Installed(); err != nil {
		t.Fatal(err) // make deps installs FRR
	}
	testutil.RequireTool(t, "vtysh")
	nsR, nsL := testutil.UniqueName("s18bg-r-"), testutil.UniqueName("s18bg-l-")
	for _, ns := range []string{nsR, nsL} {
		if err := nsutil.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := nsutil.Delete(ns); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		testutil.Exec(t, ns, "ip", "link", "set", "lo", "up")
	}
	testutil.Exec(t, "", "ip", "link", "add", "e-leaf", "netns", nsR, "type", "veth", "peer", "name", "e-router", "netns", nsL)
	rAddr, lAddr := netip.MustParseAddr("fc00:99::1"), netip.MustParseAddr("fc00:99::2")
	for ns, dev := range map[string]string{nsR: "e-leaf", nsL: "e-router"} {
		a := rAddr
		if ns == nsL {
			a = lAddr
		}
		// No duplicate address detection: FRR resets a session over a
		// link whose link-local address is still tentative.
		testutil.Exec(t, ns, "sysctl", "-qw", "net.ipv6.conf."+dev+".accept_dad=0")
		testutil.Exec(t, ns, "ip", "-6", "addr", "add", a.String()+"/64", "dev", dev, "nodad")
		testutil.Exec(t, ns, "ip", "link", "set", dev, "up")
	}
	router := &nodestate.BGP{ASN: 65001, RouterID: "10.99.0.1", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "leaf", Addr: lAddr, Local: rAddr, Dev: "e-leaf", ASN: 65002}},
		Prefixes:  []netip.Prefix{netip.MustParsePrefix("fc00:98::/64")}}
	leaf := &nodestate.BGP{ASN: 65002, RouterID: "10.99.0.2", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "router", Addr: rAddr, Local: lAddr, Dev: "e-router", ASN: 65001, PeerFRR: true}},
		Prefixes:  []netip.Prefix{netip.MustParsePrefix("fc00:97::/64")}}

	c := frr.Render("router", router)
	long := strings.Replace(c.BGPD, " timers connect 10\n", " timers connect 65535\n", 1)
	if long == c.BGPD {
		t.Fatalf("the router's configuration has no 10 s connect timer towards the leaf:\n%s", c.BGPD)
	}
	c.BGPD = long
	dir, err := os.MkdirTemp("", "s18bg-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("vtysh", "--vty_socket", dir, "-c", "show bgp neighbors "+lAddr.String()).CombinedOutput()
			log, _ := os.ReadFile(filepath.Join(dir, "bgpd.log"))
			t.Logf("router's neighbour:\n%s\nbgpd.log:\n%s", out, log)
		}
	})
	if err := frr.Start(nsR, dir, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := frr.Stop(dir); err != nil {
			t.Errorf("stop FRR: %v", err)
		}
	})
	state := func() nodestate.BGPSession {
		t.Helper()
		ss, err := frr.Sessions(nsR, dir, router)
		if err != nil || len(ss) != 1 {
			t.Fatalf("router's sessions: %v %+v", err, ss)
		}
		return ss[0]
	}
	// The router tried, was refused, and now waits for its timer.
	for deadline := time.Now().Add(60 * time.Second); state().State != "active"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the router's session with the absent leaf: %+v, want active", state())
		}
	}

	var splog strings.Builder
	var splogMu sync.Mutex
	sp := bgp.NewShared(nsL, t.TempDir(), slog.New(slog.NewTextHandler(lockedWriter{&splogMu, &splog}, nil)))
	t.Cleanup(func() {
		if t.Failed() {
			splogMu.Lock()
			t.Logf("the leaf's speaker's log:\n%s", splog.String())
			splogMu.Unlock()
		}
	})
	if err := sp.Set(leaf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Close)
	start := time.Now()
	l := &Lab{Name: "s18bg", FRR: map[string]string{"router": dir}}
	n := l.NewNudger()
	n.Started("leaf", leaf)
	for deadline := time.Now().Add(60 * time.Second); !state().Established(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the router's session with the leaf is %+v 60 s after the nudge, want established", state())
		}
	}
	t.Logf("established %v after the speaker started and the router was told", time.Since(start).Round(time.Millisecond))
	n.Close()
	if asked, failed := n.Asked(); asked < 1 || failed != 0 {
		t.Fatalf("the nudger asked for %d sessions (%d requests failed), want it asked", asked, failed)
	}

	// Asked again when it is up: nothing is asked, it stays up.
	time.Sleep(2 * time.Second)
	before := state()
	asked, err := frr.RetryNow(dir, router, []netip.Addr{lAddr})
	if err != nil || len(asked) != 0 {
		t.Errorf("RetryNow of an established session: asked %v, %v; want nothing asked", asked, err)
	}
	time.Sleep(time.Second)
	if after := state(); !after.Established() || after.Since < before.Since {
		t.Errorf("session before the second nudge %+v, after %+v: want it up and not reset", before, after)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

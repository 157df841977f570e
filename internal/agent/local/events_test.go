package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// eventNode is a namespace with a link, two of the domain's routes and
// one of its SIDs (protocol 202, as an apply leaves them).
func eventNode(t *testing.T) (string, *Local) {
	ns := testutil.NewNetns(t, "agev")
	for _, c := range [][]string{
		{"ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1"},
		{"ip", "link", "set", "d1", "up"},
		{"ip", "link", "set", "d0", "up"},
		{"ip", "-6", "addr", "add", "fc00:1::1/64", "dev", "d0", "nodad"},
		{"ip", "-6", "route", "add", "fc00:9::/64", "via", "fc00:1::2", "dev", "d0", "proto", "202"},
		{"ip", "-6", "route", "add", "fc00:a::/48", "via", "fc00:1::3", "dev", "d0", "proto", "202"},
		{"ip", "-6", "route", "add", "fc00:5::100/128", "encap", "seg6local", "action", "End", "dev", "d0", "proto", "202"},
	} {
		testutil.Exec(t, ns, c...)
	}
	l := NewLocal("n", ns)
	l.stateDir = t.TempDir()
	return ns, l
}

// kept observes l through what it keeps and afresh: the two must agree
// (the digest the controller compares); it returns that digest.
// watchedNode is eventNode with its agent watching the kernel's events
// until the test ends.
func watchedNode(t *testing.T) (string, *Local, context.Context) {
	t.Helper()
	ns, l := eventNode(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := l.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	return ns, l, ctx
}

func kept(t *testing.T, l *Local, what string) string {
	t.Helper()
	ctx := context.Background()
	got, err := l.ObserveCached(ctx, &nodestate.Node{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	fresh, err := l.Observe(ctx, &nodestate.Node{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w := &nodestate.Node{}
	if a, b := nodestate.Digest(got, w), nodestate.Digest(fresh, w); a != b {
		t.Fatalf("%s: the kept state's digest %s differs from the kernel's %s (%d routes kept, %d in the kernel)", what, a, b, len(got.Routes), len(fresh.Routes))
	}
	// In the same order too (the kept copy is sorted once per dump, not
	// per request): a state sent in full is diffed and shown as is.
	if !reflect.DeepEqual(got.Routes, fresh.Routes) || !reflect.DeepEqual(got.Rules, fresh.Rules) {
		t.Fatalf("%s: the kept state's routes or rules differ from the kernel's, or are in another order:\n%v\n%v", what, got.Routes, fresh.Routes)
	}
	return nodestate.Digest(got, w)
}

// A watched agent's kept routes are sorted once, when they are dumped:
// a request answered from them sorts none (sorting keyed every route, a
// string built per route, per request: 6 % of a no-op's agent CPU).
func TestKeptRoutesSortedOncePerDump(t *testing.T) {
	_, l, ctx := watchedNode(t)
	kept(t, l, "first")
	hits := 0
	for i := 0; hits < 3; i++ {
		if i > 100 {
			t.Fatal("no request answered from the kept state")
		}
		st, sorts := l.EventStats(), nodestate.RouteSorts()
		if _, err := l.ObserveCached(ctx, &nodestate.Node{}); err != nil {
			t.Fatal(err)
		}
		if s := l.EventStats(); s.Dumps == st.Dumps && s.Hits == st.Hits+1 {
			hits++
			if n := nodestate.RouteSorts() - sorts; n != 0 {
				t.Fatalf("a request answered from the kept state sorted %d list(s) of routes, want 0", n)
			}
		}
	}
}

// A watched agent answers from its kept routing state while nothing
// changes, and a change made by hand behind its back (a route deleted,
// a SID replaced, a link going down) changes the digest at once.
func TestWatchedDigestFollowsHandMadeChanges(t *testing.T) {
	ns, l := eventNode(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := l.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	d0 := kept(t, l, "first")
	before := l.EventStats()
	if d := kept(t, l, "again"); d != d0 {
		t.Fatalf("nothing changed, yet the digest went from %s to %s", d0, d)
	}
	if s := l.EventStats(); s.Hits != before.Hits+1 || s.Dumps != before.Dumps {
		t.Fatalf("nothing changed: want the kept state used (one more hit, no dump), got %+v after %+v", s, before)
	}
	last := d0
	for _, c := range []struct {
		what string
		cmd  []string
	}{
		{"route deleted", []string{"ip", "-6", "route", "del", "fc00:9::/64"}},
		{"SID replaced", []string{"ip", "-6", "route", "replace", "fc00:5::100/128", "encap", "seg6local", "action", "End.X", "nh6", "fc00:1::2", "dev", "d0", "proto", "202"}},
		{"route's next hop changed", []string{"ip", "-6", "route", "replace", "fc00:a::/48", "via", "fc00:1::4", "dev", "d0", "proto", "202"}},
		{"link down (its routes go)", []string{"ip", "link", "set", "d0", "down"}},
	} {
		testutil.Exec(t, ns, c.cmd...)
		d := kept(t, l, c.what)
		if d == last {
			t.Fatalf("%s: the digest did not change", c.what)
		}
		last = d
	}
	// Every observation went through the one netlink handle the watch
	// keeps (and still saw each change).
	if s := l.EventStats(); s.HandleOpens != 1 {
		t.Fatalf("%d netlink handles opened for the kept observations, want 1", s.HandleOpens)
	}
	// The watch ended (the agent stopping): every request reads the
	// kernel again.
	stop()
	deadline := time.Now().Add(30 * time.Second)
	for l.ev.running() {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not end with its context")
		}
		time.Sleep(10 * time.Millisecond)
	}
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "unreachable", "fc00:9::/64", "proto", "202")
	// Dumped by the kernel after fc00:9::/64, sorted before it.
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "unreachable", "fc00:10::/64", "proto", "202")
	if kept(t, l, "after the watch ended") == last {
		t.Fatal("after the watch ended: a route added, the digest did not change")
	}
}

// An event storm that overflows the agent's socket (ENOBUFS: lost
// notifications) leaves nothing stale, and the watch goes on working.
func TestWatchedDigestSurvivesOverflow(t *testing.T) {
	ns, l := eventNode(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	hold := make(chan struct{})
	// The smallest receive buffer, and the reader held: the storm below
	// overflows it.
	if err := l.watch(ctx, 1, hold); err != nil {
		t.Fatal(err)
	}
	d0 := kept(t, l, "first")
	var b strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "route add fc00:77:%x::/64 via fc00:1::2 dev d0 proto 202\n", i)
	}
	batch := filepath.Join(t.TempDir(), "storm")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, ns, "ip", "-6", "-batch", batch)
	close(hold)
	deadline := time.Now().Add(30 * time.Second)
	for l.EventStats().Overflows == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("500 routes on a minimal buffer never overflowed the event socket: %+v", l.EventStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	d1 := kept(t, l, "after the storm")
	if d1 == d0 {
		t.Fatal("500 routes added: the digest did not change")
	}
	// Still watching: kept while nothing changes, and the next change seen.
	before := l.EventStats()
	kept(t, l, "quiet")
	if s := l.EventStats(); s.Hits != before.Hits+1 {
		t.Fatalf("after the storm the kept state is not used: %+v after %+v", s, before)
	}
	testutil.Exec(t, ns, "ip", "-6", "route", "del", "fc00:77:7::/64")
	if kept(t, l, "one route deleted after the storm") == d1 {
		t.Fatal("a route deleted after the storm: the digest did not change")
	}
}

// The interfaces a watched agent keeps for the boundary filter's
// observation follow interfaces added, renamed and deleted by hand.
func TestWatchedInterfacesFollowLinks(t *testing.T) {
	ns, l, ctx := watchedNode(t)
	same := func(what string) {
		t.Helper()
		if _, err := l.ObserveCached(ctx, &nodestate.Node{}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		l.ev.mu.Lock()
		kept := fmt.Sprint(l.ev.links)
		l.ev.mu.Unlock()
		now, err := boundary.ListInterfaces(ns)
		if err != nil {
			t.Fatal(err)
		}
		if kept != fmt.Sprint(now) {
			t.Fatalf("%s: interfaces kept %s, the kernel's %s", what, kept, fmt.Sprint(now))
		}
	}
	same("first")
	for _, c := range []struct {
		what string
		cmd  []string
	}{
		{"veth pair added", []string{"ip", "link", "add", "d7", "type", "veth", "peer", "name", "d6"}},
		{"renamed", []string{"ip", "link", "set", "d7", "name", "d5"}},
		{"deleted", []string{"ip", "link", "del", "d5"}},
	} {
		testutil.Exec(t, ns, c.cmd...)
		same(c.what)
	}
}

// An observation resolves the pin root and names the node's namespace
// once for all its eBPF kinds and checks (bpfpin.Hold), not once per
// kind.
func TestObservationResolvesPinRootOnce(t *testing.T) {
	_, l, ctx := watchedNode(t)
	kept(t, l, "first")
	lookups, _ := bpfpin.HoldStats()
	if _, err := l.ObserveCached(ctx, &nodestate.Node{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := bpfpin.HoldStats(); n-lookups != 1 {
		t.Fatalf("one observation resolved the pin root %d times, want 1", n-lookups)
	}
}

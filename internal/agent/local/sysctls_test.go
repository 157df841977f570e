package local

import (
	"context"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// A watched agent reads the sysctls a plan sets through files it keeps
// open: no visit to the namespace while they serve, and every value
// always the kernel's — a sysctl changed by hand, an interface deleted
// (its key reads ""), the same interface created again (its new file).
func TestWatchedSysctlsKeptOpen(t *testing.T) {
	ns, l := eventNode(t)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := l.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	want := &nodestate.Node{Sysctls: []nodestate.Sysctl{
		{Key: "net.ipv6.conf.all.forwarding", Value: "1"},
		{Key: "net.ipv6.conf.d0.seg6_enabled", Value: "1"},
		{Key: "net.ipv6.conf.d9.seg6_enabled", Value: "1"}, // no such interface
	}}
	read := func(what string) map[string]string {
		t.Helper()
		got, err := l.ObserveCached(ctx, want)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fresh, err := l.Observe(ctx, want)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		m := map[string]string{}
		for _, s := range got.Sysctls {
			m[s.Key] = s.Value
		}
		for _, s := range fresh.Sysctls {
			if m[s.Key] != s.Value {
				t.Fatalf("%s: %s kept %q, the kernel says %q", what, s.Key, m[s.Key], s.Value)
			}
		}
		return m
	}
	testutil.Exec(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0", "net.ipv6.conf.d0.seg6_enabled=0")
	read("first")
	visits := l.EventStats().SysctlVisits
	// d9 does not exist: it alone is looked for again, in one visit.
	read("again")
	if v := l.EventStats().SysctlVisits; v != visits+1 {
		t.Fatalf("with one key missing: %d visit(s) to the namespace, want 1", v-visits)
	}
	testutil.Exec(t, ns, "ip", "link", "add", "d9", "type", "veth", "peer", "name", "d8")
	read("d9 created")
	visits = l.EventStats().SysctlVisits
	testutil.Exec(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.d0.seg6_enabled=1", "net.ipv6.conf.d9.seg6_enabled=1")
	if m := read("changed by hand"); m["net.ipv6.conf.all.forwarding"] != "1" || m["net.ipv6.conf.d0.seg6_enabled"] != "1" || m["net.ipv6.conf.d9.seg6_enabled"] != "1" {
		t.Fatalf("changed by hand: read %v", m)
	}
	if v := l.EventStats().SysctlVisits; v != visits {
		t.Fatalf("every key kept open: %d visit(s) to the namespace, want none", v-visits)
	}
	testutil.Exec(t, ns, "ip", "link", "del", "d9")
	if m := read("d9 deleted"); m["net.ipv6.conf.d9.seg6_enabled"] != "" {
		t.Fatalf("d9 deleted: its sysctl reads %q", m["net.ipv6.conf.d9.seg6_enabled"])
	}
	testutil.Exec(t, ns, "ip", "link", "add", "d9", "type", "veth", "peer", "name", "d8")
	if m := read("d9 created again"); m["net.ipv6.conf.d9.seg6_enabled"] != "0" {
		t.Fatalf("d9 created again: its sysctl reads %q, want the new interface's 0", m["net.ipv6.conf.d9.seg6_enabled"])
	}
}

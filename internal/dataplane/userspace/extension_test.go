package userspace

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/pkg/srv6svc"
)

func TestPrivilegedShowDel(t *testing.T) {
	tp := svctest.New(t, "h17u")
	s, err := srv6svc.Listen(srv6svc.Config{Name: "shown", Netns: tp.NFV, Interfaces: []string{tp.NIn},
		SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::1:0/112")}, OnFailure: srv6svc.OnFailureBypass, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeASM(ctx, func([]byte) srv6svc.InnerVerdict { return srv6svc.Pass }) }()
	t.Cleanup(func() { _ = srv6svc.Unbind(tp.NFV, "shown") })
	var e Extension
	for i := 0; i < 100; i++ { // ServeASM marks the binding End.ASM once it runs
		if b, _ := srv6svc.Status(tp.NFV); len(b) == 1 && b[0].Kind == "End.ASM" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	sid := netip.MustParsePrefix("fc00:5::1:0/112")
	check := func(state string) {
		t.Helper()
		entries, err := e.Show(tp.NFV)
		if err != nil || len(entries) != 1 {
			t.Fatalf("Show: %v %+v", err, entries)
		}
		line := localsid.FormatEntry(entries[0])
		t.Log(line)
		for _, want := range []string{"fc00:5::1:0/112 End.ASM", "args-bits 16", "on-failure bypass", "queues 1", "state " + state, "xsk copy", "xdp nin:native,s6svc0k:native", "nosocket-drop 0", "drop-hop-limit 0"} {
			if !strings.Contains(line, want) {
				t.Errorf("sid show line lacks %q: %s", want, line)
			}
		}
	}
	check("serving")
	if _, err := e.Del(tp.NFV, sid); err == nil {
		t.Error("del of a served binding succeeded")
	}
	cancel()
	<-done
	s.Close()
	check("closed")
	if ok, err := e.Del(tp.NFV, sid); !ok || err != nil {
		t.Fatalf("del after close: %v %v", ok, err)
	}
	if entries, _ := e.Show(tp.NFV); len(entries) != 0 {
		t.Errorf("after del: %+v", entries)
	}
	if err := e.Add(tp.NFV, sid, "userspace", nil); err == nil {
		t.Error("add succeeded")
	}
}

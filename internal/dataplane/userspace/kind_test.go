package userspace

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/userspace"
	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedApplyWaits: apply fails naming the SID while no process
// serves it (after its wait), and succeeds once one does.
func TestPrivilegedApplyWaits(t *testing.T) {
	tp := svctest.New(t, "h17k")
	pfx := netip.MustParsePrefix("fc00:5::3:0/112")
	plan := func(onFailure string) nodestate.Service {
		s, err := userspace.Kind{}.Plan(service.Input{Name: "ids", Prefix: pfx, Block: &userspace.Config{OnFailure: onFailure, Wait: "300ms"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var k NodeKind
	err := k.Apply(tp.NFV, []nodestate.Service{plan("bypass")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "fc00:5::3:0/112") || !strings.Contains(err.Error(), "no process has bound it") {
		t.Fatalf("apply without a process: %v", err)
	}
	s, err := srv6svc.Listen(srv6svc.Config{Name: "ids", Netns: tp.NFV, Interfaces: []string{tp.NIn}, SIDs: []netip.Prefix{pfx},
		OnFailure: srv6svc.OnFailureBypass, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.Forward }) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Release() })
	if err := k.Apply(tp.NFV, []nodestate.Service{plan("bypass")}, nil, nil); err != nil {
		t.Errorf("apply with the process serving: %v", err)
	}
	if err := k.Apply(tp.NFV, []nodestate.Service{plan("drop")}, nil, nil); err == nil || !strings.Contains(err.Error(), "on-failure bypass, want drop") {
		t.Errorf("apply with another policy: %v", err)
	}
	obs, err := k.Observe(tp.NFV)
	if err != nil || len(obs) != 1 || (userspace.Kind{}).Canonical(obs[0]) != (userspace.Kind{}).Canonical(plan("bypass")) {
		t.Errorf("observed %v %v: want the planned service", obs, err)
	}
	cs, err := k.Counters(tp.NFV)
	if err != nil || len(cs) != 1 || cs[0].SID != pfx || cs[0].Behavior != "userspace" {
		t.Errorf("counters %+v %v", cs, err)
	}
}

// TestMissingUSID: apply waits for a binding of the planned format: a
// process that bound a planned uSID as a full SID (it would go on by
// Segments Left, never shifting the container) is not serving it.
func TestMissingUSID(t *testing.T) {
	sid := netip.MustParsePrefix("fcbb:bb00:2a1::/48")
	b := func(usid string) []srv6svc.Binding {
		return []srv6svc.Binding{{Name: "acct", SIDs: []netip.Prefix{sid}, OnFailure: "drop", State: "serving", USID: usid}}
	}
	want := userspace.Spec{Name: "acct", OnFailure: "drop", USID: "32/16"}
	if m := missing(b(""), sid, want); !strings.Contains(m, "bound as a full SID, want a uSID of format 32/16") {
		t.Errorf("full binding for a uSID: %q", m)
	}
	if m := missing(b("32/16"), sid, want); m != "" {
		t.Errorf("uSID binding: %q", m)
	}
	if m := missing(b("32/16"), sid, userspace.Spec{Name: "acct", OnFailure: "drop"}); !strings.Contains(m, "want a full SID") {
		t.Errorf("uSID binding for a full SID: %q", m)
	}
}

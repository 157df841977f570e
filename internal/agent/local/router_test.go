package local

import (
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

type fakeRouter struct{ in *nodestate.BGP }

func (f *fakeRouter) Intent() *nodestate.BGP           { return f.in }
func (f *fakeRouter) Sessions() []nodestate.BGPSession { return nil }
func (f *fakeRouter) Set(in *nodestate.BGP) error      { f.in = in; return nil }

// A BGP intent needs a speaker: an in-process Local refuses it with the
// way out; stopping a speaker it never had is no error; with a Router the
// op sets it.
func TestBGPOpNeedsRouter(t *testing.T) {
	in := &nodestate.BGP{ASN: 65001, RouterID: "10.0.0.1"}
	l := NewLocal("egress", "")
	err := l.exec(nil, agent.Op{Kind: agent.KindBGP, Action: agent.ActSet, BGP: in})
	if err == nil || !strings.Contains(err.Error(), "segchain lab up --agents") || !strings.Contains(err.Error(), "nodes.egress.agent") {
		t.Errorf("in-process bgp op: %v", err)
	}
	if err := l.exec(nil, agent.Op{Kind: agent.KindBGP, Action: agent.ActSet, OldBGP: in}); err != nil {
		t.Errorf("stop without a speaker: %v", err)
	}
	r := &fakeRouter{}
	l.WithRouter(r)
	if err := l.exec(nil, agent.Op{Kind: agent.KindBGP, Action: agent.ActSet, BGP: in}); err != nil || r.in != in {
		t.Errorf("with a router: %v, intent %v", err, r.in)
	}
}

package server

import (
	"context"

	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// IntentReader is an IntentStore that says which intent it keeps, for
// ObserveDigest (reconcile.Store is one).
type IntentReader interface {
	// Kept is the intent in force: nil when none was handed or it is
	// suspended (a controller changed the node since).
	Kept() *nodestate.Node
}

// CachedObserver is an agent that may answer an observation from what it
// keeps between requests, kept current from the kernel's events
// (local.Local with Watch): ObserveDigest, asked for on every no-op
// apply, uses it; Observe (a plan, a status) reads the node afresh.
type CachedObserver interface {
	ObserveCached(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error)
}

// ObserveDigest implements pb.AgentServer: Observe reduced to digests,
// with the intent kept and the journal's state, so that a controller
// whose intent matches fetches nothing more (docs/scale.md); the state
// itself too when asked (full) and it differs from what is expected.
//
// With r.Kept (a no-op apply that did not plan: docs/scale.md, "Session
// 16") the desired state is the intent the agent keeps, used only if its
// digest is r.Expect; otherwise (no intent kept, or another) nothing is
// observed and the reply says so (kept false), with the digest of the
// intent kept, if any: the controller then plans and asks again.
func (s *Server) ObserveDigest(ctx context.Context, r *pb.ObserveDigestRequest) (*pb.ObserveDigestReply, error) {
	rep := &pb.ObserveDigestReply{Node: s.agent.Node(), Protocol: rpc.Protocol}
	var kept *nodestate.Node
	if ir, ok := s.intents.(IntentReader); ok {
		if kept = ir.Kept(); kept != nil {
			rep.Intent = s.intentDigest(kept)
		}
	}
	// With r.Kept, an intent kept that is not the one expected leaves
	// nothing to observe against.
	if !r.Kept || kept != nil && rep.Intent == r.Expect {
		var want nodestate.Node
		if r.Kept {
			// What the digest depends on besides the kernel, as the
			// controller's want_json would carry it (DigestWant).
			want = *nodestate.DigestWant(kept)
		} else if err := decode("want", r.WantJson, &want); err != nil {
			return nil, s.fail(ctx, "ObserveDigest", err)
		}
		want.Name = s.agent.Node()
		observe := s.agent.Observe
		if c, ok := s.agent.(CachedObserver); ok {
			observe = c.ObserveCached
		}
		got, err := observe(ctx, nodestate.DigestWant(&want))
		if err != nil {
			return nil, s.fail(ctx, "ObserveDigest", err)
		}
		rep.State = nodestate.Digest(got, &want)
		rep.Kept = r.Kept
		if r.Full && !r.Kept && rep.State != r.Expect {
			if rep.NodeJson, err = encode("node", got); err != nil {
				return nil, err
			}
			rep.HmacSecrets = rpc.KeySecrets(got.HMACKeys)
		}
	}
	if s.journal != nil {
		ops, who, err := s.journal.Unfinished(s.agent.Node())
		if err != nil {
			return nil, s.fail(ctx, "ObserveDigest", err)
		}
		rep.Unfinished = ops != nil || who != ""
	}
	if s.keptOAM != nil {
		rep.KeptOam = s.keptOAM()
	}
	return rep, nil
}

// ReportKeptOAM makes ObserveDigest report f(), the digest of the OAM
// set the node's OAM service keeps (oamsvc.Server.KeptDigest), so that
// apply hands the set only to the agents that do not keep it already:
// without it, "" (unknown: every apply hands it).
func (s *Server) ReportKeptOAM(f func() string) { s.keptOAM = f }

// intentDigest is nodestate.Digest(in, in), computed once per intent kept
// (a store hands a new *Node for each intent set, and never changes one):
// every no-op apply asks for it.
func (s *Server) intentDigest(in *nodestate.Node) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.intentDgOf != in {
		s.intentDgOf, s.intentDg = in, nodestate.Digest(in, in)
		s.intentDigests++
	}
	return s.intentDg
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// The node's intent (SetIntent) and the agent's own, in-process access to
// its server for `segchain agent --reconcile` (docs/agents.md, "Drift and
// --reconcile").

// IntentStore keeps the node's last applied intent on the agent's host
// (reconcile.Store does, under --state-dir).
type IntentStore interface {
	// SetIntent must be durable when it returns; by names the
	// controller that handed it (its lease holder).
	SetIntent(want *nodestate.Node, by string) error
}

// KeepIntents makes the server keep the intents controllers hand it
// (SetIntent) in st. Without it, SetIntent is Unimplemented and the
// controller goes on without (as with an agent of an older build).
func (s *Server) KeepIntents(st IntentStore) { s.intents = st }

// SetIntent implements pb.AgentServer.
func (s *Server) SetIntent(ctx context.Context, r *pb.SetIntentRequest) (*pb.SetIntentReply, error) {
	if err := s.checkLease(r.LeaseId); err != nil {
		return nil, s.fail(ctx, "SetIntent", err)
	}
	if s.intents == nil {
		return nil, status.Error(codes.Unimplemented, "this agent keeps no intent")
	}
	var want nodestate.Node
	if err := decode("intent", r.IntentJson, &want); err != nil {
		return nil, s.fail(ctx, "SetIntent", err)
	}
	if err := rpc.WithKeySecrets(want.HMACKeys, r.HmacSecrets); err != nil {
		return nil, s.fail(ctx, "SetIntent", status.Error(codes.InvalidArgument, err.Error()))
	}
	if want.Name != s.agent.Node() {
		return nil, s.fail(ctx, "SetIntent", status.Errorf(codes.InvalidArgument, "intent of node %q handed to the agent of node %q", want.Name, s.agent.Node()))
	}
	s.mu.Lock()
	by := s.holder
	s.mu.Unlock()
	if err := s.intents.SetIntent(&want, by); err != nil {
		return nil, s.fail(ctx, "SetIntent", err)
	}
	// Its digest now, not at the next ObserveDigest: every no-op apply
	// after this one asks for it, and the first of them should find it.
	if ir, ok := s.intents.(IntentReader); ok {
		if in := ir.Kept(); in != nil {
			s.intentDigest(in)
		}
	}
	s.log.Info("intent stored", "peer", who(ctx), "by", by, "routes", len(want.Routes), "rules", len(want.Rules), "services", len(want.Services))
	return &pb.SetIntentReply{}, nil
}

// selfAddr is the peer the agent's own requests are logged as.
type selfAddr string

func (a selfAddr) Network() string { return "inproc" }
func (a selfAddr) String() string  { return string(a) }

var _ net.Addr = selfAddr("")

// Self is the agent's own lease on its node, taken in-process through the
// same handlers a controller's requests go through (lease, op validation,
// journal, metrics, logs; logged with peer "reconcile"): while it is
// held, controllers are refused the lease, and a controller's lease
// refuses it.
type Self struct {
	s     *Server
	lease string
	who   string
}

// selfCtx marks ctx as the agent's own request.
func selfCtx(ctx context.Context) context.Context {
	return peer.NewContext(ctx, &peer.Peer{Addr: selfAddr("reconcile")})
}

// FromSelf reports whether ctx is that of a request the agent made itself
// (through Self): its implementation's Execute then runs under the
// reconcile, which holds the node's lock already. A remote peer's address
// is a TCP address, never this one.
func FromSelf(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	_, ok = p.Addr.(selfAddr)
	return ok
}

// ErrLeased wraps the refusal Self gets while a controller holds the
// node's lease.
var ErrLeased = errors.New("the node's lease is held")

// AcquireSelf takes the node's lease for the agent itself, naming holder
// (the journal names it too). A lease held by a controller fails with
// ErrLeased, naming the holder.
func (s *Server) AcquireSelf(ctx context.Context, holder string, ttl time.Duration) (*Self, error) {
	r, err := s.AcquireLease(selfCtx(ctx), &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: uint32(ttl / time.Second)})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return nil, fmt.Errorf("%w: %s", ErrLeased, status.Convert(err).Message())
		}
		return nil, err
	}
	return &Self{s: s, lease: r.LeaseId, who: holder}, nil
}

// Execute runs ops as a controller's Execute would, each journaled first
// (agent.Caps.JournalsEachOp).
func (l *Self) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	b, err := agent.MarshalOps(ops)
	if err != nil {
		return 0, err
	}
	r, err := l.s.Execute(selfCtx(ctx), &pb.ExecuteRequest{LeaseId: l.lease, OpsJson: b, JournalWho: l.who})
	if err != nil {
		return 0, err
	}
	if r.Error != "" {
		return int(r.Done), errors.New(r.Error)
	}
	return int(r.Done), nil
}

// Release gives the lease back.
func (l *Self) Release() {
	l.s.ReleaseLease(selfCtx(context.Background()), &pb.ReleaseLeaseRequest{LeaseId: l.lease})
}

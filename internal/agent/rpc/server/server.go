package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// Lease bounds.
const (
	DefaultLeaseTTL = 60 * time.Second
	MaxLeaseTTL     = 10 * time.Minute
)

// Build is what Version reports about the agent's binary.
type Build struct {
	Version, Commit, Go string
}

// Hooks observe what the server does (metrics); nil members are skipped.
type Hooks struct {
	// Op is called after each op an Execute ran (err nil on success).
	Op func(op agent.Op, d time.Duration, err error)
	// Execute is called after each Execute with its whole duration.
	Execute func(ops int, d time.Duration, err error)
}

// Server serves one node's agent.Agent (and the capabilities its Caps
// declare) over gRPC.
type Server struct {
	pb.UnimplementedAgentServer
	agent   agent.Agent
	log     *slog.Logger
	build   Build
	journal agent.Journal
	hooks   Hooks
	now     func() time.Time
	// intents, if set, keeps the intents controllers hand (intent.go).
	intents IntentStore

	mu     sync.Mutex
	lease  string
	holder string
	until  time.Time
	ttl    time.Duration // the lease's last granted TTL (checkLease's revival)
	// conn is the peer address of the connection the lease was taken or
	// last renewed on: when it closes (the controller exited or was
	// killed) the lease ends at once instead of at its expiry.
	conn string
	// grace is how long AcquireLease waits for a held lease to end before
	// refusing (leaseGrace); ended is closed when the lease held now ends.
	grace time.Duration
	ended chan struct{}
	// awaiting, if set (tests), is called when AcquireLease starts waiting
	// for a held lease to end.
	awaiting func()
	// intentDg is the digest of the kept intent intentDgOf (digest.go);
	// intentDigests counts how many were computed (tests).
	intentDgOf    *nodestate.Node
	intentDg      string
	intentDigests int
	// keptOAM, if set, is the digest of the OAM set the node keeps
	// (ReportKeptOAM).
	keptOAM func() string
}

// leaseGrace: a controller killed a moment ago still holds its leases
// until the agent has seen its connection close; an apply started right
// after waits that long rather than being refused.
const leaseGrace = 2 * time.Second

// NewServer serves a. journal (may be nil: no journal RPCs) keeps the
// per-apply journal of the node on the agent's host.
func NewServer(a agent.Agent, log *slog.Logger, b Build, journal agent.Journal, hooks Hooks) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{agent: a, log: log, build: b, journal: journal, hooks: hooks, now: time.Now, grace: leaseGrace}
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { pb.RegisterAgentServer(g, s) }

// ServerOptions are the gRPC server options every agent uses: the message
// size limit and a fixed window (rpc.Window: no bandwidth-estimating
// pings).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(rpc.MaxMessage), grpc.MaxSendMsgSize(rpc.MaxMessage),
		grpc.InitialWindowSize(rpc.Window), grpc.InitialConnWindowSize(rpc.Window),
		grpc.ReadBufferSize(rpc.ReadBuffer), grpc.SharedWriteBuffer(true)}
}

func who(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr.String()
	}
	return "?"
}

// decode reads a JSON payload strictly; a bad one is InvalidArgument and
// nothing is changed.
func decode(what string, b []byte, v any) error {
	if len(b) == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: empty", what)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: malformed JSON: %v", what, err)
	}
	return nil
}

func encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: %v", what, err)
	}
	return b, nil
}

// fail logs a handler error and returns it as a gRPC status.
func (s *Server) fail(ctx context.Context, rpc string, err error) error {
	if _, ok := status.FromError(err); !ok || status.Code(err) == codes.Unknown {
		err = status.Error(codes.Unknown, err.Error())
	}
	s.log.Warn("request failed", "rpc", rpc, "peer", who(ctx), "code", status.Code(err).String(), "err", status.Convert(err).Message())
	return err
}

// Health implements pb.AgentServer.
func (s *Server) Health(context.Context, *pb.HealthRequest) (*pb.HealthReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &pb.HealthReply{Node: s.agent.Node()}
	if s.lease != "" && s.now().Before(s.until) {
		r.LeaseHolder = s.holder
	}
	return r, nil
}

// Version implements pb.AgentServer.
func (s *Server) Version(context.Context, *pb.VersionRequest) (*pb.VersionReply, error) {
	return &pb.VersionReply{Protocol: rpc.Protocol, Version: s.build.Version, Commit: s.build.Commit, GoVersion: s.build.Go, Node: s.agent.Node()}, nil
}

// Observe implements pb.AgentServer.
func (s *Server) Observe(ctx context.Context, r *pb.ObserveRequest) (*pb.ObserveReply, error) {
	var want nodestate.Node
	if err := decode("want", r.WantJson, &want); err != nil {
		return nil, s.fail(ctx, "Observe", err)
	}
	got, err := s.agent.Observe(ctx, &want)
	if err != nil {
		return nil, s.fail(ctx, "Observe", err)
	}
	b, err := encode("node", got)
	if err != nil {
		return nil, err
	}
	return &pb.ObserveReply{NodeJson: b, HmacSecrets: rpc.KeySecrets(got.HMACKeys)}, nil
}

// checkLease verifies that id is the lease held now. A change under the
// lease's own id after it expired with nobody taking it since revives it
// for its TTL, by the rule a late renewal follows (AcquireLease): on a
// loaded machine a long apply's renewals can come later than the TTL,
// and refusing the controller's next change then failed a 500-node apply
// that no other controller contended.
func (s *Server) checkLease(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	live := s.lease != "" && now.Before(s.until)
	if !live && id != "" && id == s.lease {
		s.until = now.Add(s.ttl)
		s.log.Info("expired lease revived by its holder's change", "holder", s.holder, "ttl", s.ttl)
		return nil
	}
	switch {
	case !live:
		return status.Error(codes.FailedPrecondition, "no lease held: the controller must acquire the node's lease before changing it")
	case id != s.lease:
		return status.Errorf(codes.FailedPrecondition, "domain is being applied by %s", s.holder)
	}
	return nil
}

// Execute implements pb.AgentServer.
func (s *Server) Execute(ctx context.Context, r *pb.ExecuteRequest) (*pb.ExecuteReply, error) {
	if err := s.checkLease(r.LeaseId); err != nil {
		return nil, s.fail(ctx, "Execute", err)
	}
	var ops []agent.Op
	if err := decode("ops", r.OpsJson, &ops); err != nil {
		return nil, s.fail(ctx, "Execute", err)
	}
	if err := errors.Join(rpc.WithSecrets(ops, r.OpSecrets), rpc.NeedSecrets(ops)); err != nil {
		return nil, s.fail(ctx, "Execute", status.Error(codes.InvalidArgument, err.Error()))
	}
	if err := rpc.ValidateOps(ops); err != nil {
		return nil, s.fail(ctx, "Execute", status.Error(codes.InvalidArgument, err.Error()))
	}
	start := s.now()
	if r.JournalWho != "" {
		if err := s.needJournal(); err != nil {
			return nil, s.fail(ctx, "Execute", err)
		}
		if w, ok := s.journal.(interface{ SetWho(string) }); ok {
			w.SetWho(r.JournalWho)
		}
		// Durable before any op runs, as the controller's own journal
		// would be: the whole batch with one sync when the journal can
		// (an op journaled but never run is undone harmlessly, see
		// journal.Disk.RecordAll).
		if err := s.record(ops); err != nil {
			s.log.Warn("journal failed", "peer", who(ctx), "ops", len(ops), "err", err)
			if s.hooks.Execute != nil {
				s.hooks.Execute(len(ops), s.now().Sub(start), err)
			}
			return &pb.ExecuteReply{Error: err.Error()}, nil
		}
	}
	// Each op is timed and logged on its own.
	step := func(op agent.Op, d time.Duration, err error) {
		if s.hooks.Op != nil {
			s.hooks.Op(op, d, err)
		}
		line := firstLine(op.String())
		if err != nil {
			s.log.Warn("op failed", "peer", who(ctx), "op", line, "err", err)
			return
		}
		s.log.Info("op", "peer", who(ctx), "op", line, "duration", d)
	}
	var (
		done int
		err  error
	)
	if st := s.agent.Caps().Steps; st != nil {
		// The batch in one go: one node lock, one set of sockets.
		done, err = st.ExecuteSteps(ctx, ops, func(i int, d time.Duration, err error) { step(ops[i], d, err) })
		if err == nil && done != len(ops) {
			err = fmt.Errorf("op %s: not done", firstLine(ops[done].String()))
		}
	} else {
		for _, op := range ops {
			t := s.now()
			var n int
			n, err = s.agent.Execute(ctx, []agent.Op{op})
			if err == nil && n != 1 {
				err = fmt.Errorf("op %s: not done", firstLine(op.String()))
			}
			step(op, s.now().Sub(t), err)
			if err != nil {
				break
			}
			done++
		}
	}
	if s.hooks.Execute != nil {
		s.hooks.Execute(len(ops), s.now().Sub(start), err)
	}
	rep := &pb.ExecuteReply{Done: uint32(done)}
	if err != nil {
		rep.Error = err.Error()
	}
	return rep, nil
}

// record journals ops before they run: in one sync when the journal can
// (agent.BatchJournal), else one by one.
func (s *Server) record(ops []agent.Op) error {
	if bj, ok := s.journal.(agent.BatchJournal); ok {
		return bj.RecordAll(s.agent.Node(), ops)
	}
	for _, op := range ops {
		if err := s.journal.Record(s.agent.Node(), op); err != nil {
			return err
		}
	}
	return nil
}

func firstLine(s string) string {
	for i := range s {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// Check implements pb.AgentServer.
func (s *Server) Check(ctx context.Context, r *pb.CheckRequest) (*pb.CheckReply, error) {
	var ops []agent.Op
	if err := decode("ops", r.OpsJson, &ops); err != nil {
		return nil, s.fail(ctx, "Check", err)
	}
	if err := rpc.ValidateOps(ops); err != nil {
		return nil, s.fail(ctx, "Check", status.Error(codes.InvalidArgument, err.Error()))
	}
	ck := s.agent.Caps().Check
	if ck == nil {
		return &pb.CheckReply{}, nil
	}
	rep := &pb.CheckReply{}
	if err := ck.Check(ctx, ops); err != nil {
		rep.Error = err.Error()
	}
	return rep, nil
}

// Unsupported implements pb.AgentServer.
func (s *Server) Unsupported(ctx context.Context, r *pb.UnsupportedRequest) (*pb.UnsupportedReply, error) {
	var want nodestate.Node
	if err := decode("want", r.WantJson, &want); err != nil {
		return nil, s.fail(ctx, "Unsupported", err)
	}
	fc := s.agent.Caps().Features
	if fc == nil {
		return &pb.UnsupportedReply{}, nil
	}
	f, err := fc.Unsupported(ctx, &want)
	if err != nil {
		return nil, s.fail(ctx, "Unsupported", err)
	}
	return &pb.UnsupportedReply{Findings: f}, nil
}

// Counters implements pb.AgentServer.
func (s *Server) Counters(ctx context.Context, _ *pb.CountersRequest) (*pb.CountersReply, error) {
	c, err := s.agent.Counters(ctx)
	if err != nil {
		return nil, s.fail(ctx, "Counters", err)
	}
	b, err := encode("counters", c)
	if err != nil {
		return nil, err
	}
	return &pb.CountersReply{SidsJson: b}, nil
}

// BoundaryCounters implements pb.AgentServer.
func (s *Server) BoundaryCounters(ctx context.Context, _ *pb.BoundaryCountersRequest) (*pb.BoundaryCountersReply, error) {
	br := s.agent.Caps().Boundary
	if br == nil {
		return nil, status.Error(codes.Unimplemented, "the node's agent has no boundary counters")
	}
	c, err := br.BoundaryCounters(ctx)
	if err != nil {
		return nil, s.fail(ctx, "BoundaryCounters", err)
	}
	b, err := encode("boundary counters", c)
	if err != nil {
		return nil, err
	}
	return &pb.BoundaryCountersReply{CountersJson: b}, nil
}

// Forget implements pb.AgentServer.
func (s *Server) Forget(ctx context.Context, r *pb.ForgetRequest) (*pb.ForgetReply, error) {
	if err := s.checkLease(r.LeaseId); err != nil {
		return nil, s.fail(ctx, "Forget", err)
	}
	if err := s.agent.Forget(ctx); err != nil {
		return nil, s.fail(ctx, "Forget", err)
	}
	s.log.Info("forgot node state", "peer", who(ctx))
	return &pb.ForgetReply{}, nil
}

// Originals implements pb.AgentServer.
func (s *Server) Originals(ctx context.Context, _ *pb.OriginalsRequest) (*pb.OriginalsReply, error) {
	m, err := s.agent.Originals(ctx)
	if err != nil {
		return nil, s.fail(ctx, "Originals", err)
	}
	return &pb.OriginalsReply{Sysctls: m}, nil
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// AcquireLease implements pb.AgentServer.
func (s *Server) AcquireLease(ctx context.Context, r *pb.AcquireLeaseRequest) (*pb.AcquireLeaseReply, error) {
	if r.Holder == "" {
		return nil, s.fail(ctx, "AcquireLease", status.Error(codes.InvalidArgument, "lease: holder is empty"))
	}
	ttl := time.Duration(r.TtlSeconds) * time.Second
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	if ttl > MaxLeaseTTL {
		ttl = MaxLeaseTTL
	}
	if r.LeaseId == "" {
		s.awaitLease(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	live := s.lease != "" && now.Before(s.until)
	if live && r.LeaseId != s.lease {
		err := status.Errorf(codes.FailedPrecondition, "domain is being applied by %s (node %s leased until %s)",
			s.holder, s.agent.Node(), s.until.UTC().Format(time.RFC3339))
		s.log.Warn("lease refused", "peer", who(ctx), "holder", r.Holder, "held_by", s.holder)
		return nil, err
	}
	if !live && r.LeaseId != "" && r.LeaseId != s.lease {
		// Renewing a lease that expired and was taken and dropped, or
		// an agent restart: a new lease.
		r.LeaseId = ""
	}
	// Renewing a lease that expired with nobody taking it since (a
	// renewal late on a loaded machine) revives it under the same id:
	// a new id would strand the controller whenever the reply is lost
	// (its call timed out after the agent answered), and its next
	// Execute would be refused as "being applied by" itself.
	if r.LeaseId == "" {
		s.lease = newID()
		s.holder = r.Holder
		s.ended = make(chan struct{})
		s.log.Info("lease acquired", "peer", who(ctx), "holder", r.Holder, "ttl", ttl)
	}
	s.until, s.ttl = now.Add(ttl), ttl
	s.conn = who(ctx)
	return &pb.AcquireLeaseReply{LeaseId: s.lease, ExpiresUnix: s.until.Unix()}, nil
}

// awaitLease waits up to s.grace (or ctx's end) for a lease held by
// another controller's connection to end: a controller's kill is noticed
// only when the connection's end reaches the server. The agent's own
// reconcile neither waits nor is waited for here (a controller waits for
// it itself, saying so).
func (s *Server) awaitLease(ctx context.Context) {
	if FromSelf(ctx) {
		return
	}
	self := who(selfCtx(ctx))
	s.mu.Lock()
	held := s.lease != "" && s.now().Before(s.until) && s.conn != who(ctx) && s.conn != self
	ended, wait := s.ended, min(s.grace, s.until.Sub(s.now()))
	s.mu.Unlock()
	if !held {
		return
	}
	if s.awaiting != nil {
		s.awaiting()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ended:
	case <-ctx.Done():
	case <-t.C:
	}
}

// ReleaseLease implements pb.AgentServer.
func (s *Server) ReleaseLease(ctx context.Context, r *pb.ReleaseLeaseRequest) (*pb.ReleaseLeaseReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.LeaseId != "" && r.LeaseId == s.lease {
		s.log.Info("lease released", "peer", who(ctx), "holder", s.holder)
		s.endLeaseLocked()
	}
	return &pb.ReleaseLeaseReply{}, nil
}

// connClosed ends the lease taken on a connection that closed: its
// controller is gone (exited, killed: the kernel closes its sockets).
func (s *Server) connClosed(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != "" && s.conn == peer {
		s.log.Info("lease ended: the holder's connection closed", "peer", peer, "holder", s.holder)
		s.endLeaseLocked()
	}
}

// endLeaseLocked ends the lease held now and wakes those awaiting it.
func (s *Server) endLeaseLocked() {
	s.lease, s.holder, s.until, s.conn = "", "", time.Time{}, ""
	if s.ended != nil {
		close(s.ended)
		s.ended = nil
	}
}

func (s *Server) needJournal() error {
	if s.journal == nil {
		return status.Error(codes.Unimplemented, "this agent keeps no journal")
	}
	return nil
}

// JournalRecord implements pb.AgentServer.
func (s *Server) JournalRecord(ctx context.Context, r *pb.JournalRecordRequest) (*pb.JournalRecordReply, error) {
	if err := errors.Join(s.needJournal(), s.checkLease(r.LeaseId)); err != nil {
		return nil, s.fail(ctx, "JournalRecord", err)
	}
	var op agent.Op
	if err := decode("op", r.OpJson, &op); err != nil {
		return nil, s.fail(ctx, "JournalRecord", err)
	}
	if err := rpc.ValidateOps([]agent.Op{op}); err != nil {
		return nil, s.fail(ctx, "JournalRecord", status.Error(codes.InvalidArgument, err.Error()))
	}
	if w, ok := s.journal.(interface{ SetWho(string) }); ok && r.Who != "" {
		w.SetWho(r.Who)
	}
	if err := s.journal.Record(s.agent.Node(), op); err != nil {
		return nil, s.fail(ctx, "JournalRecord", err)
	}
	return &pb.JournalRecordReply{}, nil
}

// JournalClear implements pb.AgentServer.
func (s *Server) JournalClear(ctx context.Context, r *pb.JournalClearRequest) (*pb.JournalClearReply, error) {
	if err := errors.Join(s.needJournal(), s.checkLease(r.LeaseId)); err != nil {
		return nil, s.fail(ctx, "JournalClear", err)
	}
	if err := s.journal.Clear(s.agent.Node()); err != nil {
		return nil, s.fail(ctx, "JournalClear", err)
	}
	return &pb.JournalClearReply{}, nil
}

// JournalUnfinished implements pb.AgentServer.
func (s *Server) JournalUnfinished(ctx context.Context, _ *pb.JournalUnfinishedRequest) (*pb.JournalUnfinishedReply, error) {
	if err := s.needJournal(); err != nil {
		return nil, s.fail(ctx, "JournalUnfinished", err)
	}
	ops, who, err := s.journal.Unfinished(s.agent.Node())
	if err != nil {
		return nil, s.fail(ctx, "JournalUnfinished", err)
	}
	rep := &pb.JournalUnfinishedReply{Who: who}
	if ops != nil {
		if rep.OpsJson, err = encode("ops", ops); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// MTUs implements pb.AgentServer.
func (s *Server) MTUs(ctx context.Context, req *pb.MTUsRequest) (*pb.MTUsReply, error) {
	mr := s.agent.Caps().MTU
	if mr == nil {
		return nil, status.Error(codes.Unimplemented, "the node's agent cannot read its MTUs")
	}
	dsts := make([]netip.Addr, 0, len(req.Dsts))
	for _, d := range req.Dsts {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "mtus: destination %q: %v", d, err)
		}
		dsts = append(dsts, a)
	}
	m, err := mr.MTUs(ctx, dsts)
	if err != nil {
		return nil, s.fail(ctx, "MTUs", err)
	}
	b, err := encode("mtus", m)
	if err != nil {
		return nil, err
	}
	return &pb.MTUsReply{MtusJson: b}, nil
}

// Routes implements pb.AgentServer.
func (s *Server) Routes(ctx context.Context, _ *pb.RoutesRequest) (*pb.RoutesReply, error) {
	rr := s.agent.Caps().Routes
	if rr == nil {
		return nil, status.Error(codes.Unimplemented, "the node's agent cannot read its routes")
	}
	routes, err := rr.MainRoutes(ctx)
	if err != nil {
		return nil, s.fail(ctx, "Routes", err)
	}
	b, err := encode("routes", routes)
	if err != nil {
		return nil, err
	}
	return &pb.RoutesReply{RoutesJson: b}, nil
}

package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// DefaultTimeout bounds each call to an agent (an Execute of one op that
// loads eBPF programs included).
const DefaultTimeout = 60 * time.Second

// Client is the agent of a remote node: it implements agent.Agent over
// gRPC (its capabilities: Caps).
type Client struct {
	node    string
	addr    string
	creds   credentials.TransportCredentials
	conn    *grpc.ClientConn
	rpc     pb.AgentClient
	timeout time.Duration

	mu    sync.Mutex
	lease string
	stop  chan struct{}
	// journalWho, if set, makes every Execute journal its ops on the
	// agent first (JournalOnExecute).
	journalWho string
	// hint says how to bring the agent back when it is unreachable
	// (SetHint).
	hint string
}

// SetHint sets what an "unreachable" error adds: how to check on the
// agent and start it again (a lab's supervisor, a systemd unit).
func (c *Client) SetHint(h string) { c.hint = h }

// JournalOnExecute makes the agent record each op of every Execute in the
// node's journal, naming who, before running it; Journal.Record is then
// a no-op for this node (one round trip per op instead of two).
func (c *Client) JournalOnExecute(who string) { c.journalWho = who }

// Caps implements agent.Agent: every capability the protocol has an RPC
// for (the agent's server answers for the agent behind it), and, with
// JournalOnExecute, Execute journals each op on the agent before it
// runs it.
func (c *Client) Caps() agent.Caps {
	return agent.Caps{Features: c, Check: c, Boundary: c, Routes: c, MTU: c, Preflight: c, Intents: c, Digest: c, Kept: c, JournalsEachOp: c.journalWho != ""}
}

// Dial returns the client of node's agent at addr. With tlsConf nil the
// connection is plaintext (--insecure, loopback only). Nothing is sent
// until the first call.
func Dial(node, addr string, tlsConf *tls.Config) (*Client, error) {
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	return DialCreds(node, addr, creds)
}

// DialCreds is Dial with the connection's credentials made by the caller
// (the session's, which choose the key exchange per handshake).
func DialCreds(node, addr string, creds credentials.TransportCredentials) (*Client, error) {
	c := &Client{node: node, addr: addr, creds: creds, timeout: DefaultTimeout}
	if err := c.dial(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) dial() error {
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(c.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpc.MaxMessage), grpc.MaxCallSendMsgSize(rpc.MaxMessage)),
		// A fixed window: no bandwidth-estimating pings (rpc.Window).
		grpc.WithInitialWindowSize(rpc.Window), grpc.WithInitialConnWindowSize(rpc.Window),
		// Small buffers per connection (rpc.ReadBuffer).
		grpc.WithReadBufferSize(rpc.ReadBuffer), grpc.WithSharedWriteBuffer(true))
	if err != nil {
		return fmt.Errorf("node %s: agent %s: %w", c.node, c.addr, err)
	}
	c.conn, c.rpc = conn, pb.NewAgentClient(conn)
	return nil
}

// SetTimeout sets the per-call deadline.
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// Close releases the lease (if held) and the connection.
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.ReleaseLease(ctx)
	return c.conn.Close()
}

// Addr is the agent's address.
func (c *Client) Addr() string { return c.addr }

func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// wrap names the node and agent in an RPC error, keeping the agent's
// message plain.
func (c *Client) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if m := st.Message(); strings.Contains(m, "remote error: tls:") {
			return fmt.Errorf("node %s: agent %s: %s: the agent refused this controller's certificate (not signed by the domain CA, expired, not a controller's, or not in the agent's --allow-controller list: see its log): %s (%s)", c.node, c.addr, what, m, st.Code())
		}
		// TLS 1.3: the agent checks the controller's certificate after
		// the client has finished its handshake, so a refusal can reach
		// the client as a closed connection on its first write instead
		// of the alert, depending on timing.
		// An agent killed while the connection was being set up resets
		// it the same way: both readings, and how to bring it back.
		if m := st.Message(); st.Code() == codes.Unavailable && (strings.Contains(m, "broken pipe") || strings.Contains(m, "connection reset by peer")) && !strings.Contains(m, "while dialing") {
			stopped := ""
			if c.hint != "" {
				stopped = "; or it stopped: " + c.hint
			}
			return fmt.Errorf("node %s: agent %s: %s: the agent closed the connection right after the TLS handshake: it may have refused this controller's certificate (not signed by the domain CA, expired, not a controller's, or not in the agent's --allow-controller list: see its log)%s: %s (%s)", c.node, c.addr, what, stopped, m, st.Code())
		}
		if st.Code() == codes.Unavailable && c.hint != "" {
			return fmt.Errorf("node %s: agent %s: %s: %s (%s): agent of node %s unreachable at %s: %s", c.node, c.addr, what, st.Message(), st.Code(), c.node, c.addr, c.hint)
		}
		return fmt.Errorf("node %s: agent %s: %s: %s (%s)", c.node, c.addr, what, st.Message(), st.Code())
	}
	return fmt.Errorf("node %s: agent %s: %s: %w", c.node, c.addr, what, err)
}

// Node implements agent.Agent.
func (c *Client) Node() string { return c.node }

// Observe implements agent.Agent.
func (c *Client) Observe(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	// Of the desired state, Observe reads only the sysctl keys to report
	// (agent.Agent): the rest (every route ...) is not sent.
	var w *nodestate.Node
	if want != nil {
		w = &nodestate.Node{Name: want.Name, Sysctls: want.Sysctls}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Observe(ctx, &pb.ObserveRequest{WantJson: b})
	if err != nil {
		return nil, c.wrap("observe", err)
	}
	var got nodestate.Node
	if err := json.Unmarshal(r.NodeJson, &got); err != nil {
		return nil, c.wrap("observe", err)
	}
	if err := rpc.WithKeySecrets(got.HMACKeys, r.HmacSecrets); err != nil {
		return nil, c.wrap("observe", err)
	}
	return &got, nil
}

// Execute implements agent.Agent. A transport failure reports 0 done: an
// op the agent may still have run is in the node's journal, which the
// next apply undoes first.
func (c *Client) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	b, err := agent.MarshalOps(ops)
	if err != nil {
		return 0, err
	}
	// A batch gets a second per op on top of the call's timeout.
	ctx, cancel := context.WithTimeout(ctx, c.timeout+time.Duration(len(ops))*time.Second)
	defer cancel()
	r, err := c.rpc.Execute(ctx, &pb.ExecuteRequest{LeaseId: c.leaseID(), OpsJson: b, JournalWho: c.journalWho, OpSecrets: rpc.OpSecrets(ops)})
	if err != nil {
		return 0, c.wrap("execute", err)
	}
	if r.Error != "" {
		return int(r.Done), errors.New(r.Error)
	}
	return int(r.Done), nil
}

// Check implements agent.Checker.
func (c *Client) Check(ctx context.Context, ops []agent.Op) error {
	b, err := agent.MarshalOps(ops)
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Check(ctx, &pb.CheckRequest{OpsJson: b})
	if err != nil {
		return c.wrap("check", err)
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// Unsupported implements agent.FeatureChecker.
func (c *Client) Unsupported(ctx context.Context, want *nodestate.Node) ([]string, error) {
	b, err := json.Marshal(probed(want))
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Unsupported(ctx, &pb.UnsupportedRequest{WantJson: b})
	if err != nil {
		return nil, c.wrap("feature probe", err)
	}
	return r.Findings, nil
}

// probed is the part of a desired state the feature check judges
// (agent.FeatureChecker: behaviours, flavors, encap modes, HMAC, a BGP
// speaker): its seg6 and seg6local routes, its HMAC keys and its BGP
// intent. The rest (static routes: most of a node's state) is not sent.
func probed(want *nodestate.Node) *nodestate.Node {
	if want == nil {
		return nil
	}
	p := &nodestate.Node{Name: want.Name, HMACKeys: want.HMACKeys, BGP: want.BGP}
	for _, r := range want.Routes {
		if r.Seg6 != nil || r.Seg6Local != nil {
			p.Routes = append(p.Routes, r)
		}
	}
	return p
}

// Counters implements agent.Agent.
func (c *Client) Counters(ctx context.Context) ([]agent.SIDCounters, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Counters(ctx, &pb.CountersRequest{})
	if err != nil {
		return nil, c.wrap("counters", err)
	}
	var out []agent.SIDCounters
	if err := json.Unmarshal(r.SidsJson, &out); err != nil {
		return nil, c.wrap("counters", err)
	}
	return out, nil
}

// BoundaryCounters implements agent.BoundaryReader.
func (c *Client) BoundaryCounters(ctx context.Context) ([]nodestate.BoundaryCounter, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.BoundaryCounters(ctx, &pb.BoundaryCountersRequest{})
	if err != nil {
		return nil, c.wrap("boundary counters", err)
	}
	var out []nodestate.BoundaryCounter
	if err := json.Unmarshal(r.CountersJson, &out); err != nil {
		return nil, c.wrap("boundary counters", err)
	}
	return out, nil
}

// MTUs implements agent.MTUReader. An agent built before the MTUs RPC
// answers Unimplemented: that is agent.ErrTooOld.
func (c *Client) MTUs(ctx context.Context, dsts []netip.Addr) (*nodestate.MTUs, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	req := &pb.MTUsRequest{}
	for _, d := range dsts {
		req.Dsts = append(req.Dsts, d.String())
	}
	r, err := c.rpc.MTUs(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return nil, fmt.Errorf("node %s: agent %s: mtus: %w", c.node, c.addr, agent.ErrTooOld)
	}
	if err != nil {
		return nil, c.wrap("mtus", err)
	}
	out := &nodestate.MTUs{}
	if err := json.Unmarshal(r.MtusJson, out); err != nil {
		return nil, c.wrap("mtus", err)
	}
	return out, nil
}

// MainRoutes implements agent.RouteReader. An agent built before the
// Routes RPC answers Unimplemented: that is agent.ErrTooOld.
func (c *Client) MainRoutes(ctx context.Context) ([]nodestate.FIBRoute, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Routes(ctx, &pb.RoutesRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, fmt.Errorf("node %s: agent %s: routes: %w", c.node, c.addr, agent.ErrTooOld)
	}
	if err != nil {
		return nil, c.wrap("routes", err)
	}
	var out []nodestate.FIBRoute
	if err := json.Unmarshal(r.RoutesJson, &out); err != nil {
		return nil, c.wrap("routes", err)
	}
	return out, nil
}

// Forget implements agent.Agent.
func (c *Client) Forget(ctx context.Context) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.rpc.Forget(ctx, &pb.ForgetRequest{LeaseId: c.leaseID()})
	return c.wrap("forget", err)
}

// Originals implements agent.Agent.
func (c *Client) Originals(ctx context.Context) (map[string]string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Originals(ctx, &pb.OriginalsRequest{})
	if err != nil {
		return nil, c.wrap("originals", err)
	}
	if r.Sysctls == nil {
		return map[string]string{}, nil
	}
	return r.Sysctls, nil
}

// Version asks the agent its build and protocol.
func (c *Client) Version(ctx context.Context) (*pb.VersionReply, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Version(ctx, &pb.VersionRequest{})
	return r, c.wrap("version", err)
}

// Health asks the agent whether it serves.
func (c *Client) Health(ctx context.Context) (*pb.HealthReply, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Health(ctx, &pb.HealthRequest{})
	return r, c.wrap("health", err)
}

// Preflight checks, changing nothing, that the agent answers, serves the
// node the domain names and speaks this protocol (agent.Preflighter).
func (c *Client) Preflight(ctx context.Context) error {
	v, err := c.Version(ctx)
	if err != nil {
		if c.hint != "" && strings.Contains(err.Error(), c.hint) {
			return err // says it is unreachable, and what to do
		}
		return fmt.Errorf("%w (unreachable)", err)
	}
	if v.Protocol != rpc.Protocol {
		return fmt.Errorf("node %s: agent %s speaks protocol %d (segchain %s), this controller %d: upgrade one of them", c.node, c.addr, v.Protocol, v.Version, rpc.Protocol)
	}
	if v.Node != c.node {
		return fmt.Errorf("node %s: agent %s serves node %q", c.node, c.addr, v.Node)
	}
	return nil
}

func (c *Client) leaseID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease
}

// AcquireLease makes this controller the node's only applier and keeps
// the lease renewed until ReleaseLease. A lease held by another
// controller fails with "domain is being applied by …".
func (c *Client) AcquireLease(ctx context.Context, holder string, ttl time.Duration) error {
	cctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.AcquireLease(cctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: uint32(ttl / time.Second)})
	if err != nil {
		return c.wrap("lease", err)
	}
	c.mu.Lock()
	if c.stop != nil { // a lease taken again: one renewer
		close(c.stop)
	}
	c.lease = r.LeaseId
	stop := make(chan struct{})
	c.stop = stop
	c.mu.Unlock()
	go c.renew(holder, ttl, r.LeaseId, stop)
	return nil
}

// renew keeps the lease alive at a third of its TTL.
func (c *Client) renew(holder string, ttl time.Duration, id string, stop chan struct{}) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
			r, err := c.rpc.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: uint32(ttl / time.Second), LeaseId: id})
			cancel()
			if err == nil && r.LeaseId != id {
				// The agent restarted and lost the lease; nobody took
				// it meanwhile, so it is this controller's again.
				c.mu.Lock()
				if c.stop == stop {
					c.lease = r.LeaseId
				}
				c.mu.Unlock()
				id = r.LeaseId
			}
		}
	}
}

// ReleaseLease gives the lease back (a no-op when none is held).
func (c *Client) ReleaseLease(ctx context.Context) error {
	c.mu.Lock()
	id := c.lease
	c.lease = ""
	if c.stop != nil {
		close(c.stop)
		c.stop = nil
	}
	c.mu.Unlock()
	if id == "" {
		return nil
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.rpc.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{LeaseId: id})
	return c.wrap("release lease", err)
}

// JournalRecord appends op to the node's journal on the agent.
func (c *Client) JournalRecord(ctx context.Context, who string, op agent.Op) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.rpc.JournalRecord(ctx, &pb.JournalRecordRequest{LeaseId: c.leaseID(), Who: who, OpJson: b})
	return c.wrap("journal", err)
}

// JournalClear forgets the node's journal on the agent.
func (c *Client) JournalClear(ctx context.Context) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err := c.rpc.JournalClear(ctx, &pb.JournalClearRequest{LeaseId: c.leaseID()})
	return c.wrap("journal", err)
}

// JournalUnfinished reads the node's journal on the agent.
func (c *Client) JournalUnfinished(ctx context.Context) ([]agent.Op, string, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.JournalUnfinished(ctx, &pb.JournalUnfinishedRequest{})
	if err != nil {
		return nil, "", c.wrap("journal", err)
	}
	var ops []agent.Op
	if len(r.OpsJson) > 0 {
		if err := json.Unmarshal(r.OpsJson, &ops); err != nil {
			return nil, "", c.wrap("journal", err)
		}
	}
	return ops, r.Who, nil
}

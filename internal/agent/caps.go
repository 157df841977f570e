package agent

import (
	"context"
	"net/netip"
	"time"

	"github.com/segchain/segchain/internal/nodestate"
)

// Caps declares what an agent can do beyond the Agent interface. Each
// implementation fills it in one place, its Caps method, so a reader sees
// there what that agent can do; callers ask Caps() instead of asserting
// types. A nil member (false) means the agent cannot, and callers go on
// without it as the member's comment says.
//
// Who fills what:
//
//	                 local.Local  daemon's Local  rpc/client.Client  reconcile's agent
//	Features         yes          yes (cached)    yes                yes (cached)
//	Check            yes          yes             yes                yes
//	Steps            yes          yes (locked)    -                  -
//	Boundary         yes          yes             yes                yes
//	Routes           yes          yes             yes                yes
//	MTU              yes          yes             yes                yes
//	Links            yes          yes             -                  yes
//	Preflight        -            -               yes                -
//	Intents          -            -               yes                -
//	JournalsEachOp   -            -               JournalOnExecute   yes
//	Digest           -            -               yes                -
//	Kept             -            -               yes                -
//
// A remote agent (rpc/client) declares every capability the protocol has
// an RPC for; the agent's server answers for the agent behind it (an
// empty Check or Unsupported when that agent lacks them, Unimplemented
// for BoundaryCounters and Routes: the client's MainRoutes reports
// ErrTooOld).
type Caps struct {
	// Features probes, changing nothing, what of a desired state the
	// node's kernel cannot install: plan and apply refuse it. Without
	// it nothing is refused ahead.
	Features FeatureChecker
	// Check tells, changing nothing, that ops would fail for want of room
	// (the firewall's shared pools). Without it nothing is checked ahead.
	Check Checker
	// Steps runs a batch in one go, reporting each op: the gRPC server
	// uses it to time and log each op of an Execute. Without it the
	// server runs the ops one Execute each.
	Steps Stepper
	// Boundary reads the boundary filter's drop counters (status,
	// metrics). Without it status shows none.
	Boundary BoundaryReader
	// Routes reads the node's IPv6 main table (status' chain paths, BGP
	// settling). Without it: ErrTooOld.
	Routes RouteReader
	// MTU reads the node's interface MTUs and route lookups (status'
	// headroom check, docs/deploy.md "MTU"). Without it: ErrTooOld, the
	// check is skipped for the node.
	MTU MTUReader
	// Links reports the node's interfaces coming up (watch and the
	// agent's reconcile re-apply at once). Without it they re-apply only
	// on their own schedule.
	Links LinkWatcher
	// Preflight says, changing nothing, whether the agent can be
	// programmed at all (reachable, the right node, the same protocol).
	// Without it the agent is taken to be ready (an in-process one).
	Preflight Preflighter
	// Intents keeps the node's last applied intent on the node's host
	// (for the agent's own reconcile). Without it none is handed.
	Intents IntentKeeper
	// JournalsEachOp: Execute records each op in the node's journal
	// itself, right before running it (a remote client with
	// JournalOnExecute, the agent's own reconcile), so the controller
	// sends a node's ops of one phase in one Execute with the same crash
	// safety. False: the controller journals each op, one Execute each.
	JournalsEachOp bool
	// Digest reports a digest of the node's state (nodestate.Digest)
	// instead of the state itself: a controller fetches the state only
	// where the digest differs from its intent's. Without it every node
	// is observed in full.
	Digest StateDigester
	// Kept reports the node's digests against the intent its agent keeps
	// (the digest alone sent, no desired state): a no-op apply whose
	// inputs are those of the last apply needs no plan (docs/scale.md,
	// "Session 16"). Without it such an apply plans as any other.
	Kept KeptDigester
}

// StateDigester observes a node reduced to digests (nodestate.Digest),
// changing nothing and needing no lease; with full, a state whose digest
// is not expect (want's own digest, nodestate.Digest(want, want), which
// the caller computes once per node and command) comes whole too
// (Digests.Observed), as Observe's.
type StateDigester interface {
	ObserveDigest(ctx context.Context, want *nodestate.Node, expect string, full bool) (Digests, error)
}

// KeptDigester observes a node against the intent its agent keeps, if
// and only if that intent's digest (nodestate.Digest(intent, intent)) is
// expect: Digests.Kept says it was (State is then the node observed
// against it); false when the agent keeps no intent, another one (its
// digest in Intent), or does not know the request (an older agent).
type KeptDigester interface {
	ObserveKeptDigest(ctx context.Context, expect string) (Digests, error)
}

// Digests is what an agent reports of its node for an apply that may
// have nothing to do.
type Digests struct {
	// State is nodestate.Digest(observed, want).
	State string
	// Intent is nodestate.Digest(intent, intent) of the intent the agent
	// keeps (IntentKeeper), "" when none is kept or it is suspended.
	Intent string
	// Unfinished: the node's journal holds an unfinished command's ops
	// (the next apply undoes them first).
	Unfinished bool
	// KeptOAM is the digest of the OAM set the node's OAM service keeps
	// (chains[].oam; oam.KeepSet.Digest), "" when the agent cannot say:
	// apply hands the set only where it differs (docs/scale.md).
	KeptOAM string
	// Observed is the node's state, asked for (full) and sent only when
	// State is not want's digest.
	Observed *nodestate.Node
	// Kept: asked by ObserveKeptDigest, the agent observed the node
	// against the intent it keeps, whose digest was the one expected.
	Kept bool
}

// FeatureChecker tells, before anything changes, what of a node's desired
// state its kernel cannot install (a behaviour needing VRF devices, a
// flavor, an encap mode). Each finding is one sentence in the domain's
// terms; the error is for a node that could not be checked at all.
type FeatureChecker interface {
	Unsupported(ctx context.Context, want *nodestate.Node) ([]string, error)
}

// Checker tells, without changing anything, that ops would fail for want
// of room (the firewall's shared pools): plan and apply ask before
// anything changes on any node.
type Checker interface {
	Check(ctx context.Context, ops []Op) error
}

// Stepper runs a batch of ops in one go (under one node lock, with one
// set of netlink sockets) while reporting each op as it ends: step is
// called after every op that ran, with its index, duration and error (nil
// step: no reports). Like Execute, it stops at the first failure and
// returns how many ops succeeded. The gRPC server (rpc/server) uses it to
// log and time each op of an Execute without paying the per-call cost
// once per op.
type Stepper interface {
	ExecuteSteps(ctx context.Context, ops []Op, step func(i int, d time.Duration, err error)) (int, error)
}

// BoundaryReader reports the drop counters of the node's boundary filter
// (status shows them).
type BoundaryReader interface {
	BoundaryCounters(ctx context.Context) ([]nodestate.BoundaryCounter, error)
}

// RouteReader reports the node's IPv6 main-table routes, every protocol
// and every next hop (status follows them to show each chain's path,
// internal/chainpath).
type RouteReader interface {
	MainRoutes(ctx context.Context) ([]nodestate.FIBRoute, error)
}

// MTUReader reports the node's interfaces and their MTU and, for each
// destination, the interface and MTU of the route the kernel picks for it
// (status checks that each chain's headers fit, docs/deploy.md "MTU").
type MTUReader interface {
	MTUs(ctx context.Context, dsts []netip.Addr) (*nodestate.MTUs, error)
}

// LinkWatcher reports the node's interfaces coming up (see
// controller.Watch).
type LinkWatcher interface {
	// LinkUps sends the name of every interface that comes up (admin up
	// with carrier) until ctx ends.
	LinkUps(ctx context.Context) (<-chan string, error)
}

// Preflighter says, changing nothing, whether the agent can be programmed
// at all: reachable, serving the node the domain names, speaking a
// compatible protocol.
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// IntentKeeper keeps the node's last applied intent (the `segchain agent`
// stores it on disk and, with --reconcile, re-applies it when the node
// drifts).
type IntentKeeper interface {
	// SetIntent hands the node its desired state once it is applied
	// (a node with only its name after a destroy: "nothing").
	SetIntent(ctx context.Context, want *nodestate.Node) error
}

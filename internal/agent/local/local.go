package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
)

// StateDir keeps what the kernel cannot tell us back: the sysctl values a
// node had before segchain changed them, so destroy can restore them.
const StateDir = "/run/segchain/nodes"

// Local is an in-process agent for a node that is a network namespace on
// this machine ("" = the current namespace).
type Local struct {
	name     string
	netns    string
	stateDir string
	router   Router
	ev       *events      // Watch: the routing state kept from events
	sys      *sysctlFiles // Watch: the sysctl files kept open (sysctls.go)
	// obsH is the netlink handle a watched agent's observations keep
	// (ObserveCached), obsOpens how many were opened; both under obsMu.
	obsMu    sync.Mutex
	obsH     *dataplane.Handle
	obsOpens uint64
	// obsBnd keeps the boundary filter's maps open between those
	// observations (boundary.Reader), under obsMu.
	obsBnd *boundary.Reader
}

// Router is a node's long-running routing speaker (routing: bgp): the
// segchain agent daemon hosts one (internal/bgp) and gives it to its Local
// with WithRouter. An in-process Local has none: it lives no longer than
// the command, so a BGP intent is refused (Unsupported) before anything
// changes.
type Router interface {
	// Intent is what the speaker runs now (nil: none).
	Intent() *nodestate.BGP
	// Sessions are its sessions now.
	Sessions() []nodestate.BGPSession
	// Set starts, reconfigures or (nil) stops the speaker; it persists the
	// intent so that a restarted agent runs it again.
	Set(*nodestate.BGP) error
}

// WithRouter makes l run BGP intents with r.
func (l *Local) WithRouter(r Router) *Local {
	l.router = r
	return l
}

// NewLocal returns an agent for node name living in namespace netns.
func NewLocal(name, netns string) *Local {
	return &Local{name: name, netns: netns, stateDir: StateDir}
}

// Node implements Agent.
func (l *Local) Node() string { return l.name }

// Caps implements agent.Agent: everything but what only a remote agent
// does (preflight, intents, journaling its own ops).
func (l *Local) Caps() agent.Caps {
	return agent.Caps{Features: l, Check: l, Steps: l, Boundary: l, Routes: l, MTU: l, Links: l}
}

func (l *Local) open() (*dataplane.Handle, error) {
	h, err := dataplane.Open(l.netns)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", l.name, err)
	}
	return h, nil
}

// Observe implements Agent.
func (l *Local) Observe(_ context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	h, err := l.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	got := &nodestate.Node{Name: l.name}
	if err := l.observeRouting(h, got); err != nil {
		return nil, err
	}
	return l.observeRest(h, want, got, false, nil)
}

// observeRouting reads what netlink reports every change of (routes,
// local SIDs, rules): the part an agent watching its node keeps between
// requests (events.go).
func (l *Local) observeRouting(h *dataplane.Handle, got *nodestate.Node) error {
	routes, sids, err := h.RoutesAndLocalSIDs()
	if err != nil {
		return fmt.Errorf("node %s: read routes: %w", l.name, err)
	}
	got.Routes, got.Foreign = routes, foreignSIDs(sids)
	if got.Rules, err = h.Rules(); err != nil {
		return fmt.Errorf("node %s: read rules: %w", l.name, err)
	}
	return nil
}

// observeRest reads the rest of the node into got (whose routing part is
// filled): what no event reports a change of, read on every request;
// with kept, the sysctls through the files a watched agent keeps open
// (sysctls.go) and the interfaces it keeps from link events (links; nil:
// listed here), and got's routing part sorted already (the kept copy,
// sorted once per dump: sorting a node's routes again keyed each one, a
// string built per route, 6 % of a no-op's agent CPU).
func (l *Local) observeRest(h *dataplane.Handle, want *nodestate.Node, got *nodestate.Node, kept bool, links boundary.Interfaces) (*nodestate.Node, error) {
	// The pin root and the namespace's name, once for every kind below
	// (bpfpin.Hold).
	defer bpfpin.Hold(l.netns)()
	var err error
	if got.HMACKeys, err = h.HMACKeys(); err != nil && !errors.Is(err, dataplane.ErrNotSupported) {
		return nil, fmt.Errorf("node %s: read hmac keys: %w", l.name, err)
	}
	for _, k := range serviceKinds() {
		svcs, err := k.Observe(l.netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: read %s services: %w", l.name, k.Name(), err)
		}
		got.Services = append(got.Services, svcs...)
	}
	if kept && l.obsBnd != nil {
		got.Boundary, err = l.obsBnd.Observe(links)
	} else {
		got.Boundary, err = boundary.ObserveWith(l.netns, links)
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: read boundary: %w", l.name, err)
	}
	for _, k := range serviceKinds() {
		f, err := k.Faults(l.netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: check %s services: %w", l.name, k.Name(), err)
		}
		if len(f) > 0 {
			if got.Faults == nil {
				got.Faults = map[string][]string{}
			}
			got.Faults[k.Name()] = f
		}
	}
	hm, err := localsid.HandMade(l.netns)
	if err != nil {
		return nil, fmt.Errorf("node %s: read hand-made SIDs: %w", l.name, err)
	}
	ownedOnly(got, hm)
	if ts, err := h.TunSrc(); err == nil && ts.IsValid() && !ts.IsUnspecified() {
		got.TunSrc = ts.String()
	}
	// The keys that do not exist yet (an interface not yet created) read
	// "", all in one visit to the namespace.
	keys := make([]string, len(want.Sysctls))
	for i, s := range want.Sysctls {
		keys[i] = s.Key
	}
	var vals []string
	if kept && l.sys != nil {
		vals = l.sys.read(l.netns, keys)
	} else {
		vals = h.Sysctls(keys)
	}
	for i, v := range vals {
		got.Sysctls = append(got.Sysctls, nodestate.Sysctl{Key: keys[i], Value: v})
	}
	if l.router != nil {
		got.BGP = l.router.Intent()
		got.BGPSessions = l.router.Sessions()
	}
	if kept {
		routes, rules := got.Routes, got.Rules
		got.Routes, got.Rules = nil, nil
		got.Sort()
		got.Routes, got.Rules = routes, rules
	} else {
		got.Sort()
	}
	return got, nil
}

// Execute implements Agent.
func (l *Local) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	return l.ExecuteSteps(ctx, ops, nil)
}

// ExecuteSteps implements agent.Stepper: the ops run in order through one
// set of netlink sockets in the node's namespace, each reported to step.
func (l *Local) ExecuteSteps(_ context.Context, ops []agent.Op, step func(i int, d time.Duration, err error)) (int, error) {
	// The kept routing state is stale from the first op on (before: a
	// request during the batch must not be answered from it; after: the
	// batch's own events may still be queued).
	l.changed()
	defer l.warmAfter(warmDelay)
	defer l.changed()
	h, err := l.open()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	for i, op := range ops {
		start := time.Now()
		err := l.exec(h, op)
		if err != nil {
			err = fmt.Errorf("node %s: %s: %w", l.name, firstLine(op.String()), err)
		}
		if step != nil {
			step(i, time.Since(start), err)
		}
		if err != nil {
			return i, err
		}
	}
	return len(ops), nil
}

func firstLine(s string) string {
	for i := range s {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

func (l *Local) exec(h *dataplane.Handle, op agent.Op) error {
	switch op.Kind {
	case agent.KindRoute, agent.KindRule, agent.KindSysctl, agent.KindHMAC, agent.KindTunSrc, agent.KindBGP:
	default:
		// Services and the boundary filter may add or remove interfaces
		// (loop devices, veths): look them up afresh after.
		defer h.ForgetLinks()
	}
	switch op.Kind {
	case agent.KindSysctl:
		if v, err := h.Sysctl(op.Sysctl.Key); err == nil && v == op.Sysctl.Value {
			// Already so: nothing changes, and there is no original to
			// remember (the undo of a journaled op that never ran, whose
			// old value is the one it would have set, must not be
			// taken for the node's original).
			return nil
		}
		if err := l.rememberOriginal(op.Sysctl.Key, op.OldValue); err != nil {
			return err
		}
		return h.SetSysctl(op.Sysctl.Key, op.Sysctl.Value)
	case agent.KindTunSrc:
		a := netip.IPv6Unspecified()
		if op.TunSrc != "" {
			var err error
			if a, err = netip.ParseAddr(op.TunSrc); err != nil {
				return err
			}
		}
		return h.SetTunSrc(a)
	case agent.KindHMAC:
		if op.Action == agent.ActDelete {
			return h.DeleteHMACKey(op.HMAC.ID)
		}
		return h.SetHMACKey(*op.HMAC)
	case agent.KindRoute:
		if op.Route.Dev == dataplane.LoopDev || op.OldRoute != nil && op.OldRoute.Dev == dataplane.LoopDev {
			return l.loopRoute(h, op)
		}
		if op.Action == agent.ActDelete {
			return h.DeleteRoute(*op.Route)
		}
		return h.ReplaceRoute(*op.Route)
	case agent.KindRule:
		if op.Action == agent.ActDelete {
			return h.DeleteRule(*op.Rule)
		}
		return h.AddRule(*op.Rule)
	case agent.KindServices:
		k, ok := serviceKind(op.Service)
		if !ok {
			return fmt.Errorf("unknown service kind %q", op.Service)
		}
		// Whatever observation found broken is dropped first, so that
		// Apply below attaches or installs it again.
		if err := k.Repair(l.netns); err != nil {
			return err
		}
		hm, err := localsid.HandMade(l.netns)
		if err != nil {
			return err
		}
		return k.Apply(l.netns, op.Services, op.OldServices, hm)
	case agent.KindBoundary:
		if op.Boundary == nil {
			return boundary.Remove(l.netns)
		}
		return boundary.Apply(l.netns, *op.Boundary)
	case agent.KindBGP:
		if l.router == nil {
			if op.BGP == nil {
				return nil // no speaker here: nothing to stop
			}
			return errNoRouter(l.name)
		}
		return l.router.Set(op.BGP)
	}
	return fmt.Errorf("unknown op kind %q", op.Kind)
}

// Counters implements Agent.
func (l *Local) Counters(_ context.Context) ([]agent.SIDCounters, error) {
	h, err := l.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	sids, err := h.LocalSIDs()
	if err != nil {
		return nil, fmt.Errorf("node %s: read local SIDs: %w", l.name, err)
	}
	out := make([]agent.SIDCounters, 0, len(sids))
	for _, k := range serviceKinds() {
		cs, err := k.Counters(l.netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: read %s services: %w", l.name, k.Name(), err)
		}
		out = append(out, cs...)
	}
	for _, s := range sids {
		c := agent.SIDCounters{SID: s.Route.Dst, Route: s.Route.String(), Owned: nodestate.Owned(s.Protocol), Origin: nodestate.Origin(s.Protocol)}
		if s.Route.Seg6Local != nil {
			c.Behavior = s.Route.Seg6Local.Action
		}
		if s.Counters != nil {
			c.Counted = true
			c.Packets, c.Bytes, c.Errors = s.Counters.Packets, s.Counters.Bytes, s.Counters.Errors
		}
		out = append(out, c)
	}
	return out, nil
}

// BoundaryCounters implements agent.BoundaryReader.
func (l *Local) BoundaryCounters(_ context.Context) ([]nodestate.BoundaryCounter, error) {
	c, err := boundary.Counters(l.netns)
	if err != nil {
		return nil, fmt.Errorf("node %s: read boundary counters: %w", l.name, err)
	}
	return c, nil
}

func (l *Local) statePath() string {
	key := l.netns
	if key == "" {
		key = "_current"
	}
	return filepath.Join(l.stateDir, filepath.Base(key)+".json")
}

// Originals implements Agent.
func (l *Local) Originals(context.Context) (map[string]string, error) {
	m := map[string]string{}
	b, err := os.ReadFile(l.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", l.statePath(), err)
	}
	return m, nil
}

// rememberOriginal records a sysctl's pre-segchain value the first time
// segchain changes it.
func (l *Local) rememberOriginal(key, old string) error {
	m, err := l.Originals(context.Background())
	if err != nil {
		return err
	}
	if _, ok := m[key]; ok || old == "" {
		return nil
	}
	m[key] = old
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.MkdirAll(l.stateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(l.statePath(), b, 0o644)
}

// Forget implements Agent.
func (l *Local) Forget(context.Context) error {
	if err := os.Remove(l.statePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// foreignSIDs are the node's local SIDs the domain did not install (made
// by hand with segchain sid add, or by another tool): observed so that a
// plan can report a domain SID that would replace one of them.
func foreignSIDs(sids []dataplane.LocalSID) []nodestate.ForeignRoute {
	var out []nodestate.ForeignRoute
	for _, s := range sids {
		if !nodestate.Owned(s.Protocol) {
			out = append(out, nodestate.ForeignRoute{Route: s.Route, Protocol: s.Protocol})
		}
	}
	return out
}

// Unsupported implements agent.FeatureChecker with the kernel feature probe
// (dataplane.Handle.Probe, run once per handle). A node whose desired
// state uses no probed feature (ProbeNeeded) has nothing unsupported and
// is not probed: the probe builds and removes a throwaway namespace.
func (l *Local) Unsupported(_ context.Context, want *nodestate.Node) ([]string, error) {
	var out []string
	if ProbeNeeded(want) {
		h, err := l.open()
		if err != nil {
			return nil, err
		}
		defer h.Close()
		out = unsupported(h.Probe(), l.name, want)
	}
	if want.BGP != nil && l.router == nil {
		out = append(out, errNoRouter(l.name).Error())
	}
	// A speaker that cannot run this intent (one sharing its process
	// with other nodes: internal/bgp NewShared) refuses it here, before
	// anything changes.
	if c, ok := l.router.(interface{ Check(*nodestate.BGP) error }); ok && want.BGP != nil {
		if err := c.Check(want.BGP); err != nil {
			out = append(out, err.Error())
		}
	}
	return out, nil
}

// errNoRouter: a BGP intent reached a node programmed in-process.
func errNoRouter(node string) error {
	return fmt.Errorf("routing: bgp: node %s has no BGP speaker: it is programmed in-process, and a speaker needs the long-running segchain agent (give the node an agent, nodes.%s.agent, or bring the lab up with segchain lab up --agents)", node, node)
}

// ProbeNeeded reports whether what want installs depends on a kernel
// feature the probe finds (dataplane.NeedsProbe for its routes; HMAC
// keys): when not, Unsupported's answer is empty whatever the kernel.
func ProbeNeeded(want *nodestate.Node) bool {
	if want == nil {
		return false
	}
	if len(want.HMACKeys) > 0 {
		return true
	}
	for _, r := range want.Routes {
		if (r.Seg6 != nil || r.Seg6Local != nil) && dataplane.NeedsProbe(r) {
			return true
		}
	}
	return false
}

// unsupported lists what of want the features f lack, naming the domain
// object (Route.Owner) each route serves.
func unsupported(f dataplane.Features, node string, want *nodestate.Node) []string {
	var out []string
	for _, r := range want.Routes {
		if r.Seg6 == nil && r.Seg6Local == nil {
			continue
		}
		if err := f.Explain(r, node); err != nil {
			out = append(out, err.Error())
		}
	}
	if len(want.HMACKeys) > 0 {
		if err := f.HMAC.Require(); err != nil {
			out = append(out, fmt.Sprintf("HMAC keys: the kernel of node %s cannot do it (%v)", node, err))
		}
	}
	return out
}

// MTUs implements agent.MTUReader: the namespace's interfaces and its
// route lookups of dsts, with netlink in the node's namespace.
func (l *Local) MTUs(_ context.Context, dsts []netip.Addr) (*nodestate.MTUs, error) {
	h, err := l.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	m, err := h.MTUs(dsts)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", l.name, err)
	}
	return m, nil
}

// MainRoutes implements agent.RouteReader: the namespace's IPv6 main
// table as the kernel forwards with it.
func (l *Local) MainRoutes(context.Context) ([]nodestate.FIBRoute, error) {
	h, err := l.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	routes, err := h.MainRoutes6()
	if err != nil {
		return nil, fmt.Errorf("node %s: read main table: %w", l.name, err)
	}
	return routes, nil
}

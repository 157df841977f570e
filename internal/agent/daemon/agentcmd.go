package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/segchain/segchain/internal/health"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/bgp"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/nodelock"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/pki"
)

// Build is what the agent reports about its binary (Version RPC,
// metrics).
type Build struct {
	Version, Commit, Go string
}

type agentFlags struct {
	listen, netns, node, pkiDir string
	ca, cert, key               string
	insecure                    bool
	metrics, logFormat          string
	stateDir                    string
	reconcile                   bool
	reconcileInterval           time.Duration
	allowControllers            []string
	metricsAllow                []string
	metricsTokenFile            string
}

// Command is the `agent` command (segchain agent, and the lighter
// segchain-agent binary that links only the agent's packages).
func Command(b Build) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --node NAME --listen ADDR (--pki DIR | --insecure) [--netns NS] [--metrics ADDR] [--reconcile]",
		Short: "Serve one node to remote controllers over gRPC + mutual TLS",
		Long: `Runs the node side of segchain as a daemon: a controller whose domain file
gives the node an agent address (nodes.NAME.agent: HOST:PORT) observes,
changes and reads the node through it. The agent serves the namespace NS
(default: its own), and opens its listening socket inside NS, so ADDR is
one of the node's addresses.

The agent owns no state of its own beyond the apply journal, the lease and
the node's intent: what is programmed lives in the kernel (routes, rules,
pinned eBPF programs and maps) and is observed on every request (for the
digests an apply asks first, the routes, SIDs and rules are kept between
requests and read again when a netlink event says they changed). Starting
(or restarting) it changes nothing — it never reloads a program or flushes
a map — so a restart under traffic loses no packet (with --reconcile, its
first check repairs drift, below).

Security: mutual TLS with the domain PKI (segchain pki): the agent presents
node-NAME.crt and accepts only controller certificates of the domain CA;
with --allow-controller NAME (repeatable), only those controllers'
certificates (segchain pki issue --controller NAME), any other is refused
in the handshake and the refusal logged. --insecure serves plaintext, and
only on a loopback address.

Changes need the node's lease (one controller at a time: a second one is
told "domain is being applied by …"); the per-apply journal is kept under
--state-dir/journal, so an apply whose controller died is undone by the next.

Drift: once an apply (or destroy) has succeeded, the controller hands the
agent the node's intent — its desired state, "nothing" after a destroy —
which the agent keeps in --state-dir/intent.json (replaced atomically), so
it survives restarts. Without --reconcile that is all: drift is only
reported (segchain plan, status --check). With --reconcile the agent
compares what it observes with that intent at start, every
--reconcile-interval and as soon as an interface of the node comes up
(bringing a link down deletes the routes through it), and on drift
re-applies the intent with the controller's own diff and apply (rollback
included), under the node's lock and its own lease, logging what drifted
and what it re-applied. A controller wins: while one holds the lease (an
apply running), or once one has changed the node without handing a new
intent (an apply running or failed), the agent leaves the node alone; a
controller that asks for the lease while a reconcile holds it waits for
it (up to 30 s: "waiting for node NAME: its agent is reconciling it").

--metrics ADDR serves Prometheus /metrics (docs/metrics.md), also from
inside NS (segchain_agent_reconciles_total counts the reconciles). Only
loopback may scrape unless --metrics-allow PREFIX (repeatable: the
management network, the Prometheus server) says who else; with
--metrics-token-file FILE a scrape must also carry that bearer token
(Prometheus: authorization: {credentials_file: ...}). Refused scrapes
get 403 or 401 and are counted in segchain_agent_metrics_denied_total. Logs go
to stderr (log/slog, --log-format text|json). See docs/agents.md.`,
		Example: `  segchain agent --node nfv1 --listen [2001:db8::11]:7070 --pki /etc/segchain/pki --allow-controller ops --metrics [2001:db8::11]:9470 --metrics-allow 2001:db8:99::/64 --metrics-token-file /etc/segchain/metrics.token
  segchain agent --node r1 --netns r1 --listen 127.0.0.1:7070 --insecure
  segchain agent --node nfv1 --listen [2001:db8::11]:7070 --pki /etc/segchain/pki --reconcile --reconcile-interval 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAgent(ctx, f, b, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.node, "node", "", "the node's name in the domain file (its certificate must name it)")
	fl.StringVar(&f.listen, "listen", "", "gRPC listen address HOST:PORT, inside --netns")
	fl.StringVar(&f.netns, "netns", "", "network namespace of the node (default: the agent's own)")
	fl.StringVar(&f.pkiDir, "pki", "", "PKI directory: ca.crt, node-NAME.crt, node-NAME.key (segchain pki)")
	fl.StringVar(&f.ca, "ca", "", "CA certificate file (overrides --pki)")
	fl.StringVar(&f.cert, "cert", "", "agent certificate file (overrides --pki)")
	fl.StringVar(&f.key, "key", "", "agent key file (overrides --pki)")
	fl.BoolVar(&f.insecure, "insecure", false, "serve plaintext gRPC without TLS (loopback listen addresses only)")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus /metrics on this address HOST:PORT, inside --netns")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.stateDir, "state-dir", "/var/lib/segchain", "directory of the agent's apply journal and of the node's intent (intent.json)")
	fl.StringSliceVar(&f.allowControllers, "allow-controller", nil, "accept only the controller certificates of these names (repeatable; default: any controller certificate of the domain CA)")
	fl.StringSliceVar(&f.metricsAllow, "metrics-allow", nil, "with --metrics: the prefixes or addresses that may scrape (repeatable; default: loopback only)")
	fl.StringVar(&f.metricsTokenFile, "metrics-token-file", "", "with --metrics: require this file's first line as a bearer token (mode 0600)")
	fl.BoolVar(&f.reconcile, "reconcile", false, "re-apply the node's last applied intent when the node drifts from it (default: drift is only reported)")
	fl.DurationVar(&f.reconcileInterval, "reconcile-interval", 30*time.Second, "with --reconcile: how often to compare the node with its intent (an interface coming up also triggers a check)")
	cmd.MarkFlagRequired("node")
	cmd.MarkFlagRequired("listen")
	cmd.AddCommand(groupCommand(b))
	return cmd
}

func agentLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func runAgent(ctx context.Context, f agentFlags, bv Build, stderr io.Writer) error {
	log, err := agentLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	log = log.With("node", f.node)
	if f.netns != "" && !nsutil.Exists(f.netns) {
		return fmt.Errorf("no network namespace %q (ip netns list)", f.netns)
	}
	if err := enterNetns(f.netns); err != nil {
		return err
	}
	var files pki.Files
	if f.pkiDir != "" {
		files = pki.DirFiles(f.pkiDir, pki.RoleNode, f.node)
	}
	for _, o := range []struct {
		dst *string
		v   string
	}{{&files.CA, f.ca}, {&files.Cert, f.cert}, {&files.Key, f.key}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	secure := files.CA != "" || files.Cert != "" || files.Key != ""
	switch {
	case f.insecure && secure:
		return errors.New("--insecure and TLS files (--pki, --ca, --cert, --key) exclude each other")
	case f.insecure:
		if err := server.CheckInsecureListen(f.listen); err != nil {
			return err
		}
	case !secure:
		return errors.New("give the agent its certificates (--pki DIR, or --ca/--cert/--key); --insecure serves plaintext on loopback only")
	}
	if f.insecure && len(f.allowControllers) > 0 {
		return errors.New("--allow-controller names controller certificates: it needs TLS, not --insecure")
	}
	if f.metrics == "" && (len(f.metricsAllow) > 0 || f.metricsTokenFile != "") {
		return errors.New("--metrics-allow and --metrics-token-file need --metrics ADDR")
	}
	access := metrics.Access{}
	if f.metrics != "" {
		if access.Allow, err = metrics.ParseAllow(f.metricsAllow); err != nil {
			return err
		}
		if f.metricsTokenFile != "" {
			if access.Token, err = metrics.ReadToken(f.metricsTokenFile); err != nil {
				return err
			}
		}
	}
	if f.reconcile && f.reconcileInterval < 100*time.Millisecond {
		return fmt.Errorf("--reconcile-interval %v: want at least 100ms", f.reconcileInterval)
	}
	var tc *tls.Config
	if secure {
		if tc, err = pki.ServerTLSAllow(files, f.allowControllers); err != nil {
			return err
		}
	}
	// The listening sockets are the node's: opened inside its namespace
	// (a socket stays in the namespace it was made in).
	var lis, ml net.Listener
	if err := nsutil.Do(f.netns, func() error {
		var err error
		if lis, err = net.Listen("tcp", f.listen); err != nil {
			return err
		}
		if f.metrics != "" {
			if ml, err = net.Listen("tcp", f.metrics); err != nil {
				lis.Close()
				return fmt.Errorf("metrics: %w", err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("listen in netns %q: %w", f.netns, err)
	}
	// The node's BGP speaker (routing: bgp) lives as long as the agent;
	// the intent it ran before a restart runs again at once.
	speaker := bgp.New(f.netns, f.stateDir, log)
	if err := speaker.Restore(); err != nil {
		log.Error("bgp: restore the persisted intent", "err", err)
	}
	defer speaker.Close()
	local, intents, err := nodeLocal(ctx, f.node, f.netns, f.stateDir, speaker, log)
	if err != nil {
		return err
	}
	m := metrics.New(local, metrics.Build{Version: bv.Version, Commit: bv.Commit, Go: bv.Go}, log)
	m.WatchBFD(f.node, speaker)
	go health.RunNode(ctx, f.netns, nil, log, nil) // this node's pool health checks (docs/pools.md)
	ns := newNodeServer(local, intents, f.node, f.netns, f.stateDir, tc, server.Hooks{Op: m.Op, Execute: m.Execute}, bv, log)
	defer ns.Close()
	if f.reconcile {
		stopReconcile := startReconcile(ctx, f, local, ns.srv, ns.jr, m, log)
		defer stopReconcile()
	}
	g := ns.g
	m.Register(ns.oam.Collector())
	if f.metrics != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", m.Guarded(access))
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ml)
		defer hs.Close()
		log.Info("serving metrics", "addr", ml.Addr().String(), "allow", fmt.Sprint(access.Allow), "token", access.Token != nil)
	}
	controllers := "any of the domain CA"
	if len(f.allowControllers) > 0 {
		controllers = fmt.Sprint(f.allowControllers)
	}
	log.Info("agent serving", "listen", lis.Addr().String(), "netns", f.netns, "tls", secure, "controllers", controllers, "version", bv.Version, "pid", os.Getpid())
	err = server.Serve(ctx, g, lis)
	log.Info("agent stopped")
	return err
}

// nodeLocal is a node's local agent as the daemon serves it: under the
// node's lock, with its intent (what the last apply handed,
// internal/agent/reconcile) and its routing state kept from netlink
// events, so that ObserveDigest answers without reading the kernel
// (docs/scale.md). router is the node's BGP speaker (nil: none).
func nodeLocal(ctx context.Context, node, netns, stateDir string, router local.Router, log *slog.Logger) (*lockedLocal, *reconcile.Store, error) {
	// A long-lived agent collects dead namespaces' pins at most once a
	// minute, not on every apply of every node it serves (docs/scale.md).
	bpfpin.SweepAtMost(defunctSweep)
	key, _, err := bpfpin.Namespace(netns)
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: %w", node, err)
	}
	intents, err := reconcile.Open(stateDir, node)
	if err != nil {
		log.Error("intent not loaded", "err", err)
	}
	l := local.NewLocal(node, netns)
	if router != nil {
		l = l.WithRouter(router)
	}
	ll := &lockedLocal{Local: l, key: key, intents: intents}
	if err := ll.Watch(ctx); err != nil {
		log.Error("routing state not kept from events: every observation reads the kernel", "err", err)
	}
	return ll, intents, nil
}

// defunctSweep is how often an agent looks for dead namespaces' pins
// (bpfpin.SweepAtMost).
const defunctSweep = time.Minute

// nodeServer is a node's gRPC server with what it serves: the agent
// service (its journal, the intents it keeps) and the OAM service
// (segchain trace, chains[].oam kept).
type nodeServer struct {
	srv *server.Server
	jr  *journal.Disk
	g   *grpc.Server
	oam *oamsvc.Server
}

func newNodeServer(l *lockedLocal, intents *reconcile.Store, node, netns, stateDir string, tc *tls.Config, hooks server.Hooks, bv Build, log *slog.Logger) *nodeServer {
	jr := journal.New(filepath.Join(stateDir, "journal"), map[string]string{node: "node-" + node})
	srv := server.NewServer(l, log, server.Build{Version: bv.Version, Commit: bv.Commit, Go: bv.Go}, jr, hooks)
	srv.KeepIntents(intents)
	g := server.NewGRPCServer(srv, tc, log)
	o := oamsvc.Register(g, node, netns)
	// A previous agent of this node that was killed while it sampled
	// left its boundary marking (selectors, O-flagged tables and rules):
	// it goes now, before they follow a chain that changed since.
	if err := oam.ClearStaleSampling(o.Netns()); err != nil {
		log.Warn("stale O-flag sampling state not cleared", "node", node, "err", err)
	}
	// The kept OAM's digest goes with the state's: apply hands the set
	// only to the agents that do not keep it (docs/scale.md).
	srv.ReportKeptOAM(o.KeptDigest)
	return &nodeServer{srv: srv, jr: jr, g: g, oam: o}
}

// Close ends what the server keeps beyond its listener: the kept OAM
// and the journal.
func (n *nodeServer) Close() {
	n.oam.Close()
	n.jr.Close()
}

// lockedLocal runs each Execute under the node's lock (nodelock), like an
// in-process apply: the agent's changes and local segchain sid/fw edits
// of the same namespace go one after the other.
type lockedLocal struct {
	*local.Local
	key string

	// The kernel feature probe builds and removes a throwaway namespace:
	// its answer for the last desired state is kept, since the kernel
	// does not change while the agent runs (a no-op apply asks again with
	// the same state).
	probeMu   sync.Mutex
	probeKey  [sha256.Size]byte
	probeSeen bool
	probeLast []string

	// intents is the node's intent, suspended by a controller's Execute
	// until the controller hands the next one.
	intents *reconcile.Store
}

// Caps implements agent.Agent: Local's, with the feature probe
// remembered and the batch run under the node's lock (the embedded
// Local's would run without it).
func (l *lockedLocal) Caps() agent.Caps {
	c := l.Local.Caps()
	c.Features, c.Steps = l, l
	return c
}

// Unsupported implements agent.FeatureChecker, remembering the last
// answer.
func (l *lockedLocal) Unsupported(ctx context.Context, want *nodestate.Node) ([]string, error) {
	b, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(b)
	l.probeMu.Lock()
	defer l.probeMu.Unlock()
	if l.probeSeen && key == l.probeKey {
		return l.probeLast, nil
	}
	out, err := l.Local.Unsupported(ctx, want)
	if err == nil {
		l.probeKey, l.probeSeen, l.probeLast = key, true, out
	}
	return out, err
}

func (l *lockedLocal) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	return l.ExecuteSteps(ctx, ops, nil)
}

// ExecuteSteps implements agent.Stepper: the whole batch runs under one
// take of the node's lock (it must be defined here: the embedded Local's
// would run without the lock, and without suspending the intent).
func (l *lockedLocal) ExecuteSteps(ctx context.Context, ops []agent.Op, step func(int, time.Duration, error)) (int, error) {
	if server.FromSelf(ctx) {
		// The agent's own reconcile: it holds the node's lock already
		// (reconcile.go), and changes the node to its intent.
		return l.Local.ExecuteSteps(ctx, ops, step)
	}
	// A controller changes the node: its intent is suspended (durably,
	// before the change) until the controller hands the new one, so
	// that a reconcile never undoes an apply that is running or failed.
	if l.intents != nil {
		if err := l.intents.Supersede(fmt.Sprintf("a controller changed the node at %s (an apply running, or one that failed)",
			time.Now().UTC().Format(time.RFC3339))); err != nil {
			return 0, err
		}
	}
	set, err := nodelock.Acquire(ctx, []nodelock.Node{{Key: l.key, Name: l.Node()}}, nodelock.Options{})
	if err != nil {
		return 0, err
	}
	defer set.Release()
	return l.Local.ExecuteSteps(ctx, ops, step)
}

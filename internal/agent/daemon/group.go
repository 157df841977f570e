package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/bgp"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pki"
)

type groupFlags struct {
	nodes, pkiDir, ready, logFormat string
	allowControllers                []string
	// procs raises GOMAXPROCS once (speakerProcs) for nodeCount nodes.
	procs     *sync.Once
	nodeCount int
}

// groupSpeaker is a node's BGP speaker in a group: the first intent that
// starts one raises the process's GOMAXPROCS to the number of nodes it
// serves (unless GOMAXPROCS is set in its environment). A speaker's
// sessions live on timers (1 s keepalives, a 3 s hold time in the
// generated fabrics) run by the process's Go scheduler; with one P per
// core (2 here) the keepalives of 25 speakers queue behind their route
// work inside a process whose share of a loaded machine is that of two
// threads: at 250 nodes, 25 to a process, the hold timers expired
// thousands of times and BGP never converged (docs/scale.md, Session 17).
// One P per node served lets each node's goroutines be scheduled by the
// kernel as a process of its own was.
type groupSpeaker struct {
	*bgp.Speaker
	raise func()
}

func (g groupSpeaker) Set(in *nodestate.BGP) error {
	if in != nil {
		g.raise()
	}
	return g.Speaker.Set(in)
}

// speakerProcs raises GOMAXPROCS to n, once, unless the environment sets it.
func speakerProcs(once *sync.Once, n int, log *slog.Logger) func() {
	return func() {
		once.Do(func() {
			if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) >= n {
				return
			}
			was := runtime.GOMAXPROCS(n)
			if log != nil {
				log.Info("bgp: one P per node served", "gomaxprocs", n, "was", was)
			}
		})
	}
}

// groupCommand is `segchain agent group`: several nodes' agents in one
// process, for measuring a controller against more nodes than agent
// processes fit on one machine (docs/scale.md, "The lighter mode").
func groupCommand(b Build) *cobra.Command {
	var f groupFlags
	cmd := &cobra.Command{
		Use:   "group --nodes FILE --pki DIR [--ready FILE]",
		Short: "Serve several nodes' agents from one process (the lighter mode of the scale benchmark)",
		Long: `Serves every node listed in --nodes (a JSON list of {"node", "netns",
"listen", "state_dir"}) from this one process: each node has its own gRPC
server and listener, its own mutual-TLS identity (node-NODE.crt of --pki,
refusing any controller but --allow-controller's), its own journal, lease
and intent (under its state_dir), and its routing state kept from the
kernel's events, exactly as 'segchain agent' serves one node. What a
controller sees of a node is the same; the process is shared.

Under routing: bgp each node has its own GoBGP speaker, whose listener
and sessions live in the node's namespace (its loop runs on a thread
pinned there). It never dials (GoBGP dials from threads of its own): its
neighbours must be FRR routers, which dial, as in a Clos fabric; a link
to another GoBGP speaker (a line of agents) is refused at apply's
preflight with the reason, and needs 'segchain agent'.

What the group does not do, unlike 'segchain agent': --reconcile,
--metrics (BFD and BGP included), pool health checks. The gRPC listeners
are opened in the group's own namespace (the host's), not the node's:
port 0 takes any free port, and --ready FILE receives {"NODE": "ADDR"}
once every node is served.

It is how 'segchain perf control-plane --agents-per-process K' measures
1,000 nodes on one machine (docs/scale.md).`,
		// A synopsis (placeholders): the daemon runs until stopped.
		Example: `  segchain agent group --nodes FILE --pki DIR --allow-controller ctl --ready FILE`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runGroup(ctx, f, b, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "", "JSON file: the nodes to serve, [{\"node\", \"netns\", \"listen\", \"state_dir\"}]")
	fl.StringVar(&f.pkiDir, "pki", "", "PKI directory: ca.crt and each node's node-NAME.crt, node-NAME.key (segchain pki)")
	fl.StringVar(&f.ready, "ready", "", "write {\"NODE\": \"ADDR\"} here once every node is served")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringSliceVar(&f.allowControllers, "allow-controller", nil, "accept only the controller certificates of these names (repeatable)")
	cmd.MarkFlagRequired("nodes")
	cmd.MarkFlagRequired("pki")
	return cmd
}

// ReadGroup reads a --nodes file, checking every entry.
func ReadGroup(path string) ([]agent.GroupNode, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var nodes []agent.GroupNode
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, n := range nodes {
		switch {
		case n.Node == "":
			errs = append(errs, fmt.Errorf("%s: [%d].node: required", path, i))
		case seen[n.Node]:
			errs = append(errs, fmt.Errorf("%s: [%d].node: %q listed twice", path, i, n.Node))
		}
		seen[n.Node] = true
		if n.Netns == "" {
			errs = append(errs, fmt.Errorf("%s: [%d].netns: required (the group serves nodes in namespaces of their own)", path, i))
		}
		if _, _, err := net.SplitHostPort(n.Listen); err != nil {
			errs = append(errs, fmt.Errorf("%s: [%d].listen: %q: want HOST:PORT", path, i, n.Listen))
		}
		if n.StateDir == "" {
			errs = append(errs, fmt.Errorf("%s: [%d].state_dir: required", path, i))
		}
	}
	if len(nodes) == 0 {
		errs = append(errs, fmt.Errorf("%s: no node", path))
	}
	return nodes, errors.Join(errs...)
}

func runGroup(ctx context.Context, f groupFlags, bv Build, stderr io.Writer) error {
	log, err := agentLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	nodes, err := ReadGroup(f.nodes)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.procs = &sync.Once{}
	f.nodeCount = len(nodes)
	ready := map[string]string{}
	var wg sync.WaitGroup
	errc := make(chan error, len(nodes))
	for _, n := range nodes {
		serve, addr, err := groupNode(ctx, n, f, bv, log.With("node", n.Node))
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("node %s: %w", n.Node, err)
		}
		ready[n.Node] = addr
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(); err != nil {
				errc <- fmt.Errorf("node %s: %w", n.Node, err)
				cancel()
			}
		}()
	}
	if f.ready != "" {
		b, _ := json.Marshal(ready)
		tmp := f.ready + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			cancel()
		} else if err := os.Rename(tmp, f.ready); err != nil {
			cancel()
		}
	}
	log.Info("agent group serving", "nodes", len(nodes), "pid", os.Getpid(), "version", bv.Version)
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// groupNode sets up one node of a group as runAgent does (without
// reconcile, metrics and pool health checks; its BGP speaker shares the
// process: bgp.NewShared) and returns its serve loop and listening
// address.
func groupNode(ctx context.Context, n agent.GroupNode, f groupFlags, bv Build, log *slog.Logger) (func() error, string, error) {
	if !nsutil.Exists(n.Netns) {
		return nil, "", fmt.Errorf("no network namespace %q", n.Netns)
	}
	tc, err := pki.ServerTLSAllow(pki.DirFiles(f.pkiDir, pki.RoleNode, n.Node), f.allowControllers)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(n.StateDir, 0o700); err != nil {
		return nil, "", err
	}
	lis, err := net.Listen("tcp", n.Listen)
	if err != nil {
		return nil, "", err
	}
	// The node's BGP speaker, as runAgent's: the intent it ran before a
	// restart runs again at once.
	speaker := groupSpeaker{Speaker: bgp.NewShared(n.Netns, n.StateDir, log), raise: speakerProcs(f.procs, f.nodeCount, log)}
	if err := speaker.Restore(); err != nil {
		log.Error("bgp: restore the persisted intent", "err", err)
	}
	if speaker.Intent() != nil {
		speaker.raise()
	}
	l, intents, err := nodeLocal(ctx, n.Node, n.Netns, n.StateDir, speaker, log)
	if err != nil {
		speaker.Close()
		lis.Close()
		return nil, "", err
	}
	ns := newNodeServer(l, intents, n.Node, n.Netns, n.StateDir, tc, server.Hooks{}, bv, log)
	return func() error {
		defer speaker.Close()
		defer ns.Close()
		return server.Serve(ctx, ns.g, lis)
	}, lis.Addr().String(), nil
}

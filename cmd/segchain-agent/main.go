// Command segchain-agent is `segchain agent` in a binary of its own: the
// same flags and behaviour (internal/agent/daemon), linking only what the
// agent needs (no lab, perf, plot or dump packages), so that each agent
// process maps less of its binary: docs/agents.md, docs/benchmarks.md.
// `segchain-agent agent FLAGS` is accepted too, so it can stand in for
// `segchain agent FLAGS` (lab up --agents --agent-exe).
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/segchain/segchain/internal/agent/daemon"
	"github.com/segchain/segchain/internal/agent/rpc"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/inheritfd"
)

// version and commit are set at link time, as segchain's (make build).
var version, commit string

func build() daemon.Build {
	b := daemon.Build{Version: version, Commit: commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && b.Commit == "" {
				b.Commit = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func main() {
	if err := inheritfd.CloseOnExec(); err != nil {
		fmt.Fprintln(os.Stderr, "segchain-agent: inherited descriptors:", err)
		os.Exit(1)
	}
	b := build()
	root := daemon.Command(b)
	root.Use = "segchain-agent --node NAME --listen ADDR (--pki DIR | --insecure) [--netns NS] [--metrics ADDR]"
	root.SilenceUsage, root.SilenceErrors = true, true
	root.Version = b.Version + " " + b.Commit
	root.SetVersionTemplate("segchain-agent {{.Version}}\n")
	alias := daemon.Command(b)
	alias.Hidden = true
	root.AddCommand(alias)
	rpc.QuietLog() // before any gRPC use
	stopProfile := devprofile.Start(append([]string{"agent"}, os.Args[1:]...))
	err := root.Execute()
	stopProfile()
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "segchain-agent:", msg)
		}
		os.Exit(1)
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agent/daemon"
)

// newAgentCmd is `segchain agent` (internal/agent/daemon; cmd/segchain-agent
// is the same command in a binary of its own).
func newAgentCmd() *cobra.Command {
	v := buildVersion()
	return daemon.Command(daemon.Build{Version: v.Version, Commit: v.Commit, Go: v.Go})
}

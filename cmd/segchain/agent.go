package main

import (
	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agentcmd"
)

// newAgentCmd is `segchain agent` (internal/agentcmd; cmd/segchain-agent
// is the same command in a binary of its own).
func newAgentCmd() *cobra.Command {
	v := buildVersion()
	return agentcmd.Command(agentcmd.Build{Version: v.Version, Commit: v.Commit, Go: v.Go})
}

// Command segchain programs SRv6 service function chains on Linux: see
// `segchain --help` and docs/.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/agent/rpc"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/inheritfd"
)

func main() {
	if err := inheritfd.CloseOnExec(); err != nil {
		fmt.Fprintln(os.Stderr, "segchain: inherited descriptors:", err)
		os.Exit(1)
	}
	rpc.QuietLog() // before any gRPC use
	stopProfile := devprofile.Start(os.Args[1:])
	err := newRootCmd().Execute()
	devprofile.Phase("end")
	stopProfile()
	if err != nil {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "segchain:", msg)
		}
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "segchain",
		Short: "SRv6 service function chaining on an unpatched Linux kernel",
		Long: `segchain turns one declarative domain file (nodes, services, chains) into
SRv6 state on every node: headend policies (H.Encaps, H.Insert, H.Encaps.L2),
native seg6local endpoint behaviours and classification rules. It also brings
up lab networks in namespaces, manages local SIDs by hand (segchain sid) and
dissects SRv6 traffic (segchain dump).

Typical session:
  segchain lab up                      # the thesis' Fig. 3.1 network
  segchain plan  --lab default         # from the lab's own domain file
  segchain apply --lab default
  segchain status --lab default
  segchain lab down`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: normalizeOutput,
		Args:              cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				return printVersion(cmd.OutOrStdout(), "text", true)
			}
			return cmd.Help()
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print version, commit, Go and kernel versions and kernel features (as segchain version)")
	root.AddCommand(
		newLabCmd(),
		newPlanCmd(), newApplyCmd(), newDestroyCmd(), newStatusCmd(), newWatchCmd(),
		newSidCmd(local.SIDExtensions()...),
		newFwCmd(),
		newDumpCmd(),
		newTraceCmd(), newPingCmd(), newTracerouteCmd(), newGraphCmd(),
		newHealthCmd(),
		newPerfCmd(),
		newValidateCmd(),
		newVersionCmd(),
		newAgentCmd(), newPKICmd(),
	)
	suggestSubcommands(root)
	return root
}

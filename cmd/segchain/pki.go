package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/pki"
)

func newPKICmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Create the domain CA and the certificates of agents and controllers (mutual TLS)",
		Long: `segchain agents and controllers talk gRPC over mutual TLS. Every certificate
is signed by the domain's own CA and says its role and name in a URI SAN,
segchain://node/NAME or segchain://controller/NAME, and in its extended key
usage (node: server auth; controller: client auth). An agent accepts only a
controller certificate of its CA; a controller accepts only the certificate
of the node it meant to reach, whatever address it dialed.

Keys are ECDSA P-256; every file is written with mode 0600. Layout of DIR:
  ca.crt ca.key                      the domain CA (keep ca.key offline)
  node-NAME.crt node-NAME.key        an agent's (copy to the node with ca.crt)
  controller-NAME.crt controller-NAME.key
See docs/agents.md.`,
		Example: `  segchain pki init --dir ca
  segchain pki issue nfv1 --dir ca --host 192.0.2.11
  segchain pki issue --controller ops --dir ca`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "pki", "PKI directory")
	var domain string
	initCmd := &cobra.Command{
		Use:   "init [--dir DIR] [--domain NAME]",
		Short: "Create the domain CA (ca.crt, ca.key) in DIR",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pki.Init(dir, domain); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created domain CA in %s (ca.crt, ca.key)\n", dir)
			return nil
		},
	}
	initCmd.Flags().StringVar(&domain, "domain", "segchain", "domain name in the CA's subject")
	var controller string
	var hosts []string
	var validity time.Duration
	issue := &cobra.Command{
		Use:   "issue NODE | issue --controller NAME",
		Short: "Issue a node's (agent) or a controller's certificate signed by the domain CA",
		Args: func(cmd *cobra.Command, args []string) error {
			if controller != "" {
				return cobra.NoArgs(cmd, args)
			}
			if len(args) != 1 {
				return fmt.Errorf("give the node's name (as in the domain file), or --controller NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			role, name := pki.RoleController, controller
			if controller == "" {
				role, name = pki.RoleNode, args[0]
			}
			o := pki.IssueOptions{Hosts: hosts}
			if validity > 0 {
				o.NotBefore = time.Now().Add(-time.Minute)
				o.NotAfter = o.NotBefore.Add(validity)
			}
			f, err := pki.Issue(dir, role, name, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "issued %s certificate for %s: %s, %s\n", role, name, f.Cert, f.Key)
			return nil
		},
	}
	issue.Flags().StringVar(&controller, "controller", "", "issue a controller's certificate named NAME instead of a node's")
	issue.Flags().StringSliceVar(&hosts, "host", nil, "IP address or DNS name to add as SAN (informational: agents are verified by node name)")
	issue.Flags().DurationVar(&validity, "validity", 0, "validity (default two years)")
	cmd.AddCommand(initCmd, issue)
	return cmd
}

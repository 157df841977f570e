package main

import "github.com/spf13/cobra"

// Placeholder until the dump verb lands; replaced by its real implementation.
func newDumpCmd() *cobra.Command {
	return &cobra.Command{Use: "dump", Hidden: true}
}

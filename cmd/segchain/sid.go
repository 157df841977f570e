package main

import "github.com/spf13/cobra"

// Placeholder until the sid verb lands; replaced by its real implementation.
func newSidCmd() *cobra.Command {
	return &cobra.Command{Use: "sid", Hidden: true}
}

package main

import "github.com/spf13/cobra"

// Placeholder until the lab verb lands; replaced by its real implementation.
func newLabCmd() *cobra.Command {
	return &cobra.Command{Use: "lab", Hidden: true}
}

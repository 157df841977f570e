package main

import "github.com/spf13/cobra"

// Placeholders until the domain verbs land.
func newPlanCmd() *cobra.Command     { return &cobra.Command{Use: "plan", Hidden: true} }
func newApplyCmd() *cobra.Command    { return &cobra.Command{Use: "apply", Hidden: true} }
func newDestroyCmd() *cobra.Command  { return &cobra.Command{Use: "destroy", Hidden: true} }
func newStatusCmd() *cobra.Command   { return &cobra.Command{Use: "status", Hidden: true} }
func newValidateCmd() *cobra.Command { return &cobra.Command{Use: "validate", Hidden: true} }

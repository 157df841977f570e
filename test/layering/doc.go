// Package layering checks the package graph with go list -deps: the intent
// packages (config, plan, controller, the agent protocol, the service
// kinds' intent halves) link no eBPF or netlink module, and no package
// depends on a layer above its own.
package layering

// Package layering checks the package graph with go list: the intent
// packages (config, plan, controller, the agent protocol, the service
// kinds' intent halves) link no eBPF or netlink module, no package
// depends on a layer above its own, and a service kind's package is
// imported only by the registration list, its data path and (for the two
// first kinds' YAML) config: everybody else iterates the registry.
package layering

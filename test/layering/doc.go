// Package layering checks the package graph with one `go list ./...`:
// every package of the module has a layer (layerOf: a new package is one
// line there, and the test fails, naming it, until it has one), no package
// depends on a layer above its own, the intent packages (config, plan,
// controller, the agent protocol, everything under internal/service) link
// no eBPF or netlink module, and a service kind's intent half is imported
// only by the registration list, its node half (internal/dataplane/<kind>)
// and (for the two first kinds' YAML) config: everybody else iterates the
// registry. docs_test.go checks that the package tables of
// docs/architecture.md name every package, once, and no package that is
// gone.
package layering

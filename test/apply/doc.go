// Package apply holds process-level tests of apply, plan, status and
// destroy under faults: eBPF state broken behind segchain's back, two
// commands at once, and commands killed with SIGKILL. They run the segchain
// binary against a lab of their own, as an operator would.
package apply

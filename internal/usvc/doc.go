// Package usvc shows userspace SR-aware services (pkg/srv6svc bindings,
// End.ASM included) in `segchain sid`: show lists every binding's SIDs with
// state, queues, mode and counters; del and flush remove bindings whose
// process is gone. Binding itself is done by the service process.
package usvc

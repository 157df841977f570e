// Package local is the in-namespace implementation of agent.Agent:
// Local observes and changes one network namespace on this machine through
// netlink, bpffs and the service kinds' data paths (kinds.go lists their
// node halves). Only this package and the data-path packages below it
// touch the kernel; the protocol (package agent) is plain data.
package local

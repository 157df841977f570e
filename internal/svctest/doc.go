// Package svctest builds the two-namespace testbed the userspace-service
// tests share (pkg/srv6svc, examples/services): a tester namespace that
// sends scapy-crafted SRv6 packets to an NFV namespace, which serves the
// SIDs and routes the processed packets back to the tester's sink
// interface, where a capture counts and dissects them.
package svctest

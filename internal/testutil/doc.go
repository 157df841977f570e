// Package testutil holds helpers shared by segchain's tests: gating of
// privileged tests, throwaway network namespaces that are removed even when
// a test fails, and access to the external oracles (scapy, tshark).
package testutil

// Package native holds the privileged end-to-end tests of the kernel's own
// SRv6 behaviours as segchain programs them: headend modes and every native
// seg6local endpoint behaviour, installed through `segchain sid` and the
// dataplane API, exercised with scapy-crafted packets and checked with tshark.
package native

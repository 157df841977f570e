// Package health checks the instances of service-function pools and writes
// their liveness straight into the headend's pinned map (no control-plane
// round trip): carrier of the SF's interface, ICMPv6 echo, TCP connect,
// and an in-band SRv6 probe that goes through the instance's SID (its
// proxy and SR-unaware SF, or its SR-aware function) and comes back to the
// prober. Rise/fall counts debounce; every transition is logged (slog),
// counted and kept with its reason for status. docs/pools.md.
package health

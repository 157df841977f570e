// Command ids is segchain's example SR-aware IDS/IPS (after SR-Snort): it
// applies Suricata-style rules, with srv6.* keywords on the segment list,
// Segments Left and ARGS, to the inner packets of SRv6 traffic, and prints
// an EVE JSON line per alert. In IPS mode, drop rules drop.
//
// Offline mode reads a capture file:
//
//	ids -rules FILE -pcap FILE [-ips] [-var NAME=VALUE]... [-args-bits N] [-write-pcap OUT]
//
// See README.md and docs/ids.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

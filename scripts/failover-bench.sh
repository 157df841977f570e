#!/bin/sh
# failover-bench.sh — how fast a pool fails over (#29, docs/pools.md):
# for each health kind (carrier, echo, in-band srv6) and failure (the SF's
# link down; its forwarding dropped by nft with carrier kept), under a
# steady stream of FLOWS flows × RATE datagrams/s through a pool of three
# End.AD firewalls, the failed instance's loss in ms per flow, the
# detection time, the other flows' loss, flows moved on failure and back
# on recovery, and the probe packets' share of the instance link.
# A lab in namespaces (root), about 30 s. The selection cost at the
# headend is `segchain perf run -f examples/perf/pools.yaml`.
#
#   sudo scripts/failover-bench.sh            # FLOWS=30 RATE=200
#   sudo FLOWS=60 RATE=100 scripts/failover-bench.sh
#   sudo HOG=4 scripts/failover-bench.sh      # the checker starved (false transitions)
set -eu
cd "$(dirname "$0")/.."
SEGCHAIN_FAILOVER_BENCH=1 FLOWS="${FLOWS:-30}" RATE="${RATE:-200}" HOG="${HOG:-0}" \
	go test -count=1 -run '^TestFailoverBench$' -v ./test/pools/ | grep '^|'

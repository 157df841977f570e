// Package fwperf adds the SR-aware firewall (End.AN.FW) to `segchain perf`:
// a recipe whose throughput is compared with native End and with
// ip6tables/nftables holding the same number of rules
// (examples/perf/firewall.yaml).
package fwperf

// Package pools tests service-function pools end to end in a lab with real
// SFs (nftables behind End.AD proxies, the SR-aware End.AN.FW): the
// headend's per-flow selection, health checks through the function and
// failover, bypass and drop (docs/pools.md).
package pools

// Package metrics is the Prometheus exposition of a segchain agent: its
// node's per-SID and per-service counters and boundary drops, read from the
// agent on every scrape, and the agent's apply/op durations and build
// (docs/metrics.md lists every metric).
package metrics

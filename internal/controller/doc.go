// Package controller applies a plan to a domain's nodes through their
// agents: it diffs observed against desired state, orders the changes
// make-before-break across nodes, rolls every node back when a change fails,
// and gathers status (chains, per-SID counters, drift).
package controller

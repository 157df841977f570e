// Package nodelock serializes the commands that change a node: one lock
// file per network namespace under /run/segchain/locks, held with flock(2)
// (so it dies with its process) and naming its holder (pid, command line,
// since when) for whoever waits. Several nodes are always locked in the
// same sorted order, so two commands cannot deadlock.
package nodelock

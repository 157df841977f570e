package main

import (
	"context"
	"io"

	"github.com/segchain/segchain/internal/nodelock"
	"github.com/segchain/segchain/internal/session"
)

// noWaitUsage is the --no-wait flag's help, the same on every verb that
// changes nodes.
const noWaitUsage = "fail at once if another segchain command holds a node's lock, instead of waiting for it"

// lockNetns takes the lock of the one namespace of a `sid` or `fw` edit
// (session.LockNodes: the lock apply takes on a node).
func lockNetns(ctx context.Context, ew io.Writer, netns string, noWait bool) (*nodelock.Set, error) {
	name := netns
	if name == "" {
		name = "(current netns)"
	}
	return session.LockNodes(ctx, ew, map[string]string{name: netns}, noWait)
}

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nodelock"
)

// noWaitUsage is the --no-wait flag's help, the same on every verb that
// changes nodes.
const noWaitUsage = "fail at once if another segchain command holds a node's lock, instead of waiting for it"

// nodeKey names a node's kernel state for its lock and journal: the
// network namespace's identity (bpfpin.Namespace), so that `--netns NS`,
// `ip netns exec NS` and a lab node are the same node.
func nodeKey(netns string) (string, error) {
	key, _, err := bpfpin.Namespace(netns)
	return key, err
}

// lockNodes takes the lock of every node (name → netns) in the fixed
// order nodelock uses, telling ew whom it waits for.
func lockNodes(ctx context.Context, ew io.Writer, nodes map[string]string, noWait bool) (*nodelock.Set, error) {
	var ns []nodelock.Node
	for name, netns := range nodes {
		key, err := nodeKey(netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		ns = append(ns, nodelock.Node{Key: key, Name: name})
	}
	return nodelock.Acquire(ctx, ns, nodelock.Options{NoWait: noWait, Waiting: func(node string, h nodelock.Holder) {
		fmt.Fprintf(ew, "segchain: waiting for lock on node %s held by %s\n", node, h)
	}})
}

// lockNetns is lockNodes for the one namespace of a `sid` or `fw` edit.
func lockNetns(ctx context.Context, ew io.Writer, netns string, noWait bool) (*nodelock.Set, error) {
	name := netns
	if name == "" {
		name = "(current netns)"
	}
	return lockNodes(ctx, ew, map[string]string{name: netns}, noWait)
}

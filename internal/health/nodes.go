package health

import (
	"context"
	"log/slog"
	"sync"
)

// RunNodes runs RunNode on every node of a domain at once (nodes: node
// name → network namespace) until ctx ends: the checks of a lab without
// agents, where one process stands in for every node's agent.
func RunNodes(ctx context.Context, nodes map[string]string, log *slog.Logger) {
	netnsOf := func(node string) (string, bool) {
		ns, ok := nodes[node]
		return ns, ok
	}
	var wg sync.WaitGroup
	for node, ns := range nodes {
		wg.Go(func() { RunNode(ctx, ns, netnsOf, log.With("node", node), nil) })
	}
	wg.Wait()
}

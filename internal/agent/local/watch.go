package local

import (
	"context"
	"fmt"

	"github.com/segchain/segchain/internal/dataplane"
)

// LinkUps implements agent.LinkWatcher: an RTNLGRP_LINK subscription inside the
// node's namespace, reporting each link that gets carrier.
func (l *Local) LinkUps(ctx context.Context) (<-chan string, error) {
	var up map[string]bool
	out := make(chan string, 16)
	done, err := dataplane.WatchCarrier(ctx, l.netns, func(now map[string]bool) { up = now }, func(name string, carrier bool) {
		was := up[name]
		up[name] = carrier
		if carrier && !was {
			select {
			case out <- name:
			case <-ctx.Done():
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", l.name, err)
	}
	go func() {
		<-done
		close(out)
	}()
	return out, nil
}

package agenttest

import (
	"context"
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
)

// Capabilities of a function, to plug into Agent.With.

// RoutesFunc is an agent.RouteReader.
type RoutesFunc func(ctx context.Context) ([]nodestate.FIBRoute, error)

// MainRoutes implements agent.RouteReader.
func (f RoutesFunc) MainRoutes(ctx context.Context) ([]nodestate.FIBRoute, error) { return f(ctx) }

// BoundaryFunc is an agent.BoundaryReader.
type BoundaryFunc func(ctx context.Context) ([]nodestate.BoundaryCounter, error)

// BoundaryCounters implements agent.BoundaryReader.
func (f BoundaryFunc) BoundaryCounters(ctx context.Context) ([]nodestate.BoundaryCounter, error) {
	return f(ctx)
}

// MTUFunc is an agent.MTUReader.
type MTUFunc func(ctx context.Context, dsts []netip.Addr) (*nodestate.MTUs, error)

// MTUs implements agent.MTUReader.
func (f MTUFunc) MTUs(ctx context.Context, dsts []netip.Addr) (*nodestate.MTUs, error) {
	return f(ctx, dsts)
}

package client

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// SetIntent implements agent.IntentKeeper. An agent that keeps no
// intent (an older build, or none configured: Unimplemented) is not an
// error: it has nothing to reconcile.
func (c *Client) SetIntent(ctx context.Context, want *nodestate.Node) error {
	b, err := json.Marshal(want)
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.rpc.SetIntent(ctx, &pb.SetIntentRequest{LeaseId: c.leaseID(), IntentJson: b, HmacSecrets: rpc.KeySecrets(want.HMACKeys)})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return c.wrap("set intent", err)
}

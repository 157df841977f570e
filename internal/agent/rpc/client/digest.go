package client

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// ObserveDigest implements agent.StateDigester. It checks what Preflight
// does (the node served, the protocol) on the way: an agent that passes
// needs no other call for an apply with nothing to do. An agent older
// than the RPC answers Unimplemented: agent.ErrTooOld. expect is
// nodestate.Digest(want, want).
func (c *Client) ObserveDigest(ctx context.Context, want *nodestate.Node, expect string, full bool) (agent.Digests, error) {
	b, err := json.Marshal(nodestate.DigestWant(want))
	if err != nil {
		return agent.Digests{}, err
	}
	return c.observeDigest(ctx, &pb.ObserveDigestRequest{WantJson: b, Expect: expect, Full: full})
}

// ObserveKeptDigest implements agent.KeptDigester: ObserveDigest against
// the intent the agent keeps, if its digest is expect, with no desired
// state sent. An agent that does not know the request (older than
// session 16) answers as to an empty want, without kept: Digests.Kept
// false, which the caller takes as "plan and ask again".
func (c *Client) ObserveKeptDigest(ctx context.Context, expect string) (agent.Digests, error) {
	return c.observeDigest(ctx, &pb.ObserveDigestRequest{Expect: expect, Kept: true})
}

func (c *Client) observeDigest(ctx context.Context, req *pb.ObserveDigestRequest) (agent.Digests, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.ObserveDigest(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return agent.Digests{}, fmt.Errorf("node %s: agent %s: observe digest: %w", c.node, c.addr, agent.ErrTooOld)
	}
	if err != nil {
		return agent.Digests{}, c.wrap("observe digest", err)
	}
	if r.Protocol != rpc.Protocol {
		return agent.Digests{}, fmt.Errorf("node %s: agent %s speaks protocol %d, this controller %d: upgrade one of them", c.node, c.addr, r.Protocol, rpc.Protocol)
	}
	if r.Node != c.node {
		return agent.Digests{}, fmt.Errorf("node %s: agent %s serves node %q", c.node, c.addr, r.Node)
	}
	d := agent.Digests{State: r.State, Intent: r.Intent, Unfinished: r.Unfinished, KeptOAM: r.KeptOam, Kept: req.Kept && r.Kept}
	if len(r.NodeJson) > 0 {
		var got nodestate.Node
		if err := json.Unmarshal(r.NodeJson, &got); err != nil {
			return agent.Digests{}, c.wrap("observe digest", err)
		}
		if err := rpc.WithKeySecrets(got.HMACKeys, r.HmacSecrets); err != nil {
			return agent.Digests{}, c.wrap("observe digest", err)
		}
		d.Observed = &got
	}
	return d, nil
}

package rpc

import (
	"fmt"
	"slices"

	"github.com/segchain/segchain/internal/agent"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/nodestate"
)

// HMAC secrets cross the wire in typed fields beside the JSON payloads,
// never in them: nodestate.HMACKey.Secret has no JSON form, so the
// journal, the logs, plan and status can never hold one. These helpers
// move them between the two.

// OpSecrets lists the secrets of ops' hmac ops that set a key: the only
// ones the agent needs (a delete names the key id; the controller
// computes rollbacks itself).
func OpSecrets(ops []agent.Op) []*pb.OpSecret {
	var out []*pb.OpSecret
	for i, op := range ops {
		if op.Kind == agent.KindHMAC && op.Action == agent.ActSet && op.HMAC != nil && len(op.HMAC.Secret) > 0 {
			out = append(out, &pb.OpSecret{Op: uint32(i), Secret: op.HMAC.Secret})
		}
	}
	return out
}

// WithSecrets puts secrets back into the hmac ops of ops (decoded from
// JSON: their keys are their own copies). A secret for an op that does
// not set an hmac key, or out of range, is refused: the request is
// malformed.
func WithSecrets(ops []agent.Op, secrets []*pb.OpSecret) error {
	for _, s := range secrets {
		i := int(s.GetOp())
		if i >= len(ops) || ops[i].Kind != agent.KindHMAC || ops[i].Action != agent.ActSet || ops[i].HMAC == nil {
			return fmt.Errorf("op_secrets: op %d does not set an hmac key", s.GetOp())
		}
		ops[i].HMAC.Secret = slices.Clone(s.Secret)
	}
	return nil
}

// KeySecrets lists the secrets of keys.
func KeySecrets(keys []nodestate.HMACKey) []*pb.HMACSecret {
	var out []*pb.HMACSecret
	for _, k := range keys {
		if len(k.Secret) > 0 {
			out = append(out, &pb.HMACSecret{Id: k.ID, Secret: k.Secret})
		}
	}
	return out
}

// WithKeySecrets puts secrets back into keys, by key id. A secret of a key
// keys does not have is refused.
func WithKeySecrets(keys []nodestate.HMACKey, secrets []*pb.HMACSecret) error {
	for _, s := range secrets {
		i := slices.IndexFunc(keys, func(k nodestate.HMACKey) bool { return k.ID == s.GetId() })
		if i < 0 {
			return fmt.Errorf("hmac_secrets: no hmac key %d", s.GetId())
		}
		keys[i].Secret = slices.Clone(s.Secret)
	}
	return nil
}

// NeedSecrets refuses an hmac op that sets a key without its secret (a
// controller that sent none, of a build from before op_secrets): the
// kernel would refuse it mid-batch, later and less clearly.
func NeedSecrets(ops []agent.Op) error {
	for _, op := range ops {
		if op.Kind == agent.KindHMAC && op.Action == agent.ActSet && op.HMAC != nil && len(op.HMAC.Secret) == 0 {
			return fmt.Errorf("%s: no secret sent with it (a controller older than this agent?)", op.HMAC)
		}
	}
	return nil
}

package rpc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// ValidateOps refuses, before anything runs, ops a controller never sends:
// an unknown action, an op without its object, a sysctl outside net.*.
// Routes and rules need no owner check here: the data plane stamps and
// matches segchain's protocol (nodestate.Proto) on every write and
// delete, so an op never touches a route or rule segchain does not own;
// the only other protocols an op may name (Route.Proto, Rule.Proto) are
// segchain's own, old and new (ownProto).
// Kinds whose shape this package does not know (service kinds) are left
// to the agent's implementation, which refuses what it cannot do.
func ValidateOps(ops []agent.Op) error {
	var errs []error
	for i, op := range ops {
		if err := validateOp(op); err != nil {
			errs = append(errs, fmt.Errorf("op %d (%s %s): %w", i, op.Kind, op.Action, err))
		}
	}
	return errors.Join(errs...)
}

func validateOp(op agent.Op) error {
	switch op.Action {
	case agent.ActSet, agent.ActReplace, agent.ActAdd, agent.ActDelete:
	default:
		return fmt.Errorf("unknown action %q", op.Action)
	}
	if op.Kind == "" {
		return errors.New("no kind")
	}
	switch op.Kind {
	case agent.KindRoute:
		if op.Route == nil {
			return errors.New("no route")
		}
		if !op.Route.Dst.IsValid() {
			return errors.New("route without a destination")
		}
		if !ownProto(op.Route.Proto) {
			return fmt.Errorf("route protocol %d is not segchain's", op.Route.Proto)
		}
		if op.OldRoute != nil && !ownProto(op.OldRoute.Proto) {
			return fmt.Errorf("old route protocol %d is not segchain's", op.OldRoute.Proto)
		}
	case agent.KindRule:
		if op.Rule == nil {
			return errors.New("no rule")
		}
		if !ownProto(op.Rule.Proto) {
			return fmt.Errorf("rule protocol %d is not segchain's", op.Rule.Proto)
		}
	case agent.KindSysctl:
		if op.Sysctl == nil {
			return errors.New("no sysctl")
		}
		if k := op.Sysctl.Key; !strings.HasPrefix(k, "net.") || strings.Contains(k, "..") || strings.ContainsAny(k, "/\x00") {
			return fmt.Errorf("sysctl %q: segchain sets only net.* keys", k)
		}
	case agent.KindHMAC:
		if op.HMAC == nil {
			return errors.New("no hmac key")
		}
	case agent.KindBGP:
		if b := op.BGP; b != nil {
			if b.ASN == 0 {
				return errors.New("bgp without an ASN")
			}
			for _, n := range b.Neighbors {
				if !n.Addr.IsValid() || n.ASN == 0 || n.Dev == "" {
					return fmt.Errorf("bgp neighbor %q: needs an address, an ASN and an interface", n.Node)
				}
			}
		}
	}
	return nil
}

// ownProto: p is 0 (nodestate.Proto) or one of segchain's own route
// protocols an op may name: the domain's and hand-made SIDs', the numbers
// older versions used included (apply renumbers those).
func ownProto(p int) bool {
	return p == 0 || nodestate.Owned(p) || nodestate.HandMade(p)
}

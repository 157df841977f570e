package agentrpc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/segchain/segchain/internal/agent"
)

// ValidateOps refuses, before anything runs, ops a controller never sends:
// an unknown action, an op without its object, a sysctl outside net.*.
// Routes and rules need no owner check here: the data plane stamps and
// matches segchain's protocol (nodestate.Proto) on every write and
// delete, so an op never touches a route or rule segchain does not own.
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
	case agent.KindRule:
		if op.Rule == nil {
			return errors.New("no rule")
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

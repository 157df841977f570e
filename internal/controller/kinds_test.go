package controller

import (
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// proxies is the proxies as a node's services.
func proxies(ps ...srunaware.Proxy) []nodestate.Service {
	var out []nodestate.Service
	for _, p := range ps {
		out = append(out, p.Service())
	}
	return out
}

// firewalls is the firewall instances as a node's services.
func firewalls(fs ...firewall.Spec) []nodestate.Service {
	var out []nodestate.Service
	for _, f := range fs {
		out = append(out, f.Service())
	}
	return out
}

// isKind reports whether op sets the services of kind.
func isKind(op agent.Op, kind string) bool {
	return op.Kind == agent.KindServices && op.Service == kind
}

package controller

import (
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/srunaware"
)

var (
	proxies   = srunaware.Services
	firewalls = firewall.Services
)

// isKind reports whether op sets the services of kind.
func isKind(op agent.Op, kind string) bool {
	return op.Kind == agent.KindServices && op.Service == kind
}

// Package kinds lists the service kinds' intent halves: one line per kind.
// Their node halves are listed in internal/agent/local/kinds.go.
package kinds

import (
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/netfilter"
	"github.com/segchain/segchain/internal/service/srunaware"
	"github.com/segchain/segchain/internal/service/userspace"
)

// Registry returns the registry of every service kind, in the order plan
// output and diffs visit them.
func Registry() *service.Registry {
	r, err := service.NewRegistry(
		srunaware.Kind{},
		firewall.Kind{},
		netfilter.Kind{},
		userspace.Kind{},
		pool.Kind{},
	)
	if err != nil {
		panic(err) // a duplicate name in the list above: a programming error
	}
	return r
}

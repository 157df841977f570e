package nodestate_test

import (
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// Every route segchain installs is told apart by its rtnetlink protocol:
// two components sharing one would see each other's routes as drift.
func TestRouteProtocolsDistinct(t *testing.T) {
	protos := map[string]int{
		"Proto":                 nodestate.Proto,
		"ProtoManual":           nodestate.ProtoManual,
		"ProtoNFLoop":           nodestate.ProtoNFLoop,
		"ProtoBGP":              nodestate.ProtoBGP,
		"srv6svc.RouteProtocol": srv6svc.RouteProtocol,
	}
	seen := map[int]string{}
	for name, p := range protos {
		if o, dup := seen[p]; dup {
			t.Errorf("%s and %s share rtnetlink protocol %d", name, o, p)
		}
		seen[p] = name
	}
}

package nodestate

import (
	"encoding/json"
	"net/netip"
)

// Service is one SID of a service kind (internal/service) in plain data:
// the kind's name as the domain file spells it ("sr-unaware",
// "firewall"), the SID prefix its data path serves, and the kind's own
// specification, which only the kind reads (its pure package in
// internal/service/... defines the type and the canonical text).
type Service struct {
	Kind string          `json:"kind"`
	SID  netip.Prefix    `json:"sid"`
	Spec json.RawMessage `json:"spec,omitempty"`
}

// ServicesOf returns the services of one kind, in order.
func ServicesOf(list []Service, kind string) []Service {
	var out []Service
	for _, s := range list {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

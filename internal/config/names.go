package config

import "strings"

// canonicalBehavior returns the iproute2 spelling of a behaviour name given
// in any case ("end.dx6" → "End.DX6"), the way segchain sid matches them, or
// the name unchanged when it is not one of Behaviors (validation then
// reports it).
func canonicalBehavior(name string) string {
	for _, b := range Behaviors {
		if strings.EqualFold(b, name) {
			return b
		}
	}
	return name
}

// canonicalNames spells every behaviour of the domain as iproute2 does, so
// that a domain file matches behaviour names exactly as `segchain sid` does.
func canonicalNames(d *Domain) {
	for _, s := range d.Services {
		if s != nil && !s.Served() {
			s.Behavior = canonicalBehavior(s.Behavior)
		}
	}
	for _, c := range d.Chains {
		if c == nil {
			continue
		}
		for _, e := range []*Egress{c.Egress, c.Return} {
			if e != nil {
				e.Behavior = canonicalBehavior(e.Behavior)
			}
		}
	}
}

package config

import (
	"net/netip"
	"strconv"
)

// SummaryPrefixes are routing.summaries parsed (entries that do not parse
// are left out: validation reports them).
func (d *Domain) SummaryPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range d.Routing.Summaries {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is6() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// summaries validates routing.summaries: IPv6 prefixes, no two
// overlapping (a prefix would then belong to two blocks).
func (v *validator) summaries() {
	r := v.d.Routing
	if len(r.Summaries) == 0 {
		return
	}
	var ok []netip.Prefix
	var at []int
	for i, s := range r.Summaries {
		path := "routing.summaries[" + strconv.Itoa(i) + "]"
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			v.errf(path, "%q is not a prefix: %v", s, err)
			continue
		case !p.Addr().Is6():
			v.errf(path, "%s: want an IPv6 prefix", s)
			continue
		case p != p.Masked():
			v.errf(path, "%s has host bits set (did you mean %s?)", s, p.Masked())
			continue
		}
		for j, q := range ok {
			if q.Overlaps(p) {
				v.errf(path, "%s overlaps routing.summaries[%d] %s", s, at[j], q)
			}
		}
		ok = append(ok, p)
		at = append(at, i)
	}
}

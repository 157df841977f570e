package sid

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
)

// Request asks Allocate for the SID of one named function on a node. At most
// one of Pinned (a FUNCT value) and PinnedSID (a whole SID inside the
// locator, ARGS zero) may be set; neither means "allocate".
type Request struct {
	Name      string
	Pinned    *uint64
	PinnedSID netip.Addr
}

// ErrExhausted means the FUNCT range has no free value left.
var ErrExhausted = errors.New("no free FUNCT value")

// Range is the FUNCT range Allocate hashes into for format f: 0x100..0xffff
// (four hex digits, readable: fc00:2::1a2b:0) when FUNCT has at least 16
// bits, else 1..2^F-1.
func Range(f Format) (lo, hi uint64) {
	if f.FunctionBits >= 16 {
		return 0x100, 0xffff
	}
	if f.FunctionBits == 0 {
		return 0, 0
	}
	return 1, uint64(1)<<f.FunctionBits - 1
}

// Home is the FUNCT value a name hashes to on a node: FNV-1a 64 of
// "node/name" folded into Range(f).
func Home(node, name string, f Format) uint64 {
	lo, hi := Range(f)
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{'/'})
	h.Write([]byte(name))
	return lo + h.Sum64()%(hi-lo+1)
}

// Allocate assigns a SID to every request on one node. The rules, in order:
//
//  1. FUNCT 0 is reserved, and so is the FUNCT holding the node's address
//     LOC::1 (FUNCT 1 when the format has no ARGS and no spare bits).
//  2. Pinned FUNCT values and pinned SIDs are taken as given; two requests
//     pinning the same FUNCT, a pin outside the locator or a pin with ARGS
//     bits set are errors.
//  3. Every other name hashes to its home FUNCT (see Home). A home value no
//     other request hashes to or pins is taken directly, so such a service
//     keeps its SID whatever other services are added or removed.
//  4. Names whose home value is contested are placed in sorted-name order by
//     linear probing (wrapping inside Range) to the next free value.
//
// The result is a pure function of (node, loc, f, the set of requests).
func Allocate(node string, loc netip.Prefix, f Format, reqs []Request) (map[string]netip.Addr, error) {
	if err := checkLocator(loc, f); err != nil {
		return nil, fmt.Errorf("allocate SIDs on %s: %w", node, err)
	}
	lo, hi := Range(f)
	reqs = append([]Request(nil), reqs...)
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Name < reqs[j].Name })

	taken := map[uint64]string{0: "(reserved)"}
	na, err := NodeAddr(loc, f)
	if err != nil {
		return nil, fmt.Errorf("allocate SIDs on %s: %w", node, err)
	}
	_, nf, _ := Split(na, f)
	taken[nf] = "(node address)"

	out := make(map[string]netip.Addr, len(reqs))
	var errs []error
	var free []Request
	for i, r := range reqs {
		if i > 0 && reqs[i-1].Name == r.Name {
			errs = append(errs, fmt.Errorf("%s: duplicate request %q", node, r.Name))
			continue
		}
		var funct uint64
		var a netip.Addr
		switch {
		case r.Pinned != nil && r.PinnedSID.IsValid():
			errs = append(errs, fmt.Errorf("%s: %s pins both a FUNCT and a SID", node, r.Name))
			continue
		case r.Pinned != nil:
			funct = *r.Pinned
			if a, err = Compose(loc, funct, 0, f); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", node, r.Name, err))
				continue
			}
		case r.PinnedSID.IsValid():
			a = r.PinnedSID
			if !Contains(loc, a, f) {
				errs = append(errs, fmt.Errorf("%s: %s: SID %s outside locator %s", node, r.Name, a, loc))
				continue
			}
			_, funct, _ = Split(a, f)
			if c, _ := Compose(loc, funct, 0, f); c != a {
				errs = append(errs, fmt.Errorf("%s: %s: SID %s has ARGS or trailing bits set", node, r.Name, a))
				continue
			}
		default:
			free = append(free, r)
			continue
		}
		if other, ok := taken[funct]; ok {
			errs = append(errs, fmt.Errorf("%s: %s: FUNCT %#x already used by %s", node, r.Name, funct, other))
			continue
		}
		taken[funct] = r.Name
		out[r.Name] = a
	}
	if len(free) > 0 && hi == 0 {
		errs = append(errs, fmt.Errorf("%s: %w: the format has no FUNCT bits", node, ErrExhausted))
		free = nil
	}

	// Rule 3: uncontested homes first.
	homes := map[uint64]int{}
	for _, r := range free {
		homes[Home(node, r.Name, f)]++
	}
	var contested []Request
	for _, r := range free {
		h := Home(node, r.Name, f)
		if _, used := taken[h]; used || homes[h] > 1 {
			contested = append(contested, r)
			continue
		}
		taken[h] = r.Name
		a, err := Compose(loc, h, 0, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", node, r.Name, err))
			continue
		}
		out[r.Name] = a
	}
	// Rule 4: probe for the rest, in sorted-name order.
	size := hi - lo + 1
	for _, r := range contested {
		h := Home(node, r.Name, f)
		placed := false
		for k := uint64(0); k < size; k++ {
			v := lo + (h-lo+k)%size
			if _, used := taken[v]; used {
				continue
			}
			taken[v] = r.Name
			a, err := Compose(loc, v, 0, f)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", node, r.Name, err))
			} else {
				out[r.Name] = a
			}
			placed = true
			break
		}
		if !placed {
			errs = append(errs, fmt.Errorf("%s: %s: %w in %#x..%#x", node, r.Name, ErrExhausted, lo, hi))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("allocate SIDs: %w", err)
	}
	return out, nil
}

package bpfpin

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/cilium/ebpf"
)

// SIDEntry is one entry of a map keyed by SID prefix (an LPM trie).
type SIDEntry[V any] struct {
	SID netip.Prefix
	Val V
}

// LPMKey is the key layout every SID trie uses: struct bpf_lpm_trie_key's
// prefix length, then the IPv6 address.
type LPMKey struct {
	Prefixlen uint32
	Addr      [16]byte
}

// SIDEntries reads every entry of a SID trie (key: LPMKey's layout), sorted
// by address; what names the map in errors.
func SIDEntries[V any](m *ebpf.Map, what string) ([]SIDEntry[V], error) {
	var (
		k   LPMKey
		v   V
		out []SIDEntry[V]
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, SIDEntry[V]{netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)), v})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate %s sids: %w", what, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SID.Addr().Less(out[j].SID.Addr()) })
	return out, nil
}

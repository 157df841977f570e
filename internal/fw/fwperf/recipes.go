package fwperf

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/fw"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/perf"
)

type recipe struct {
	name, desc string
	setup      func(env *perf.Env, k int, p perf.Params) ([]byte, error)
}

func (r recipe) Name() string     { return r.name }
func (r recipe) Describe() string { return r.desc }
func (r recipe) Setup(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if p.Size == 0 {
		p.Size = 64
	}
	b, err := r.setup(env, k, p)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", r.name, err)
	}
	return b, nil
}

// Recipes are the firewall's recipes for `segchain perf`:
//
//	End.AN.FW  the eBPF SR-aware firewall holding N rules (the experiment's
//	           rule count, at least 1), none of which matches the test
//	           packet: `-p udp --dport 10000+i -j DROP` for i < N, the
//	           ip6tables/nftables baselines' rules; policy accept, so every
//	           packet is classified against the whole rule set and then
//	           forwarded by End (go-next). Encap mode: an SRv6 packet
//	           (SRH: far SID, firewall SID; SL 1) carrying an IPv6 UDP
//	           packet to port 9.
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		recipe{"End.AN.FW", "eBPF SR-aware firewall with N non-matching rules, policy accept (End)", firewall},
	}
}

// Rules returns the recipe's n rules (exported for tests and docs).
func Rules(n int) ([]fwrule.Rule, error) {
	var out []fwrule.Rule
	for i := range n {
		r, err := fwrule.Parse([]string{"-p", "udp", "--dport", fmt.Sprint(10000 + i%50000), "-j", "DROP"}, fwrule.IPv6)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func firewall(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("the eBPF firewall needs the SUT's namespace: %w", fw.ErrNotSupported)
	}
	n := max(p.Rules, 1)
	if n > fw.MaxRules {
		return nil, fmt.Errorf("%d rules: at most %d: %w", n, fw.MaxRules, fw.ErrNotSupported)
	}
	rules, err := Rules(n)
	if err != nil {
		return nil, err
	}
	sid := netip.PrefixFrom(sidAddr(k), 112).Masked()
	in := fw.Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: rules}
	if err := env.Do(func() error { return fw.Apply("", in) }); err != nil {
		return nil, err
	}
	return frame(env, k, p.Size), nil
}

// sidAddr is the firewall SID recipe k's packets carry (ARGS 0xf1 of the
// instance's /112).
func sidAddr(k int) netip.Addr { return perf.Addr("sid", k, 0xf1) }

// frame is the recipe's test packet: SRv6 (SRH [far SID, firewall SID],
// SL 1) carrying an IPv6 UDP packet to port 9.
func frame(env *perf.Env, k, size int) []byte {
	src := netip.MustParseAddr(perf.TesterTx6)
	inner := ipv6(src, perf.Addr("dst", k, 1), 17, udp(size-48))
	list := []netip.Addr{perf.Addr("far", k, 1), sidAddr(k)}
	return eth(env, ipv6(src, sidAddr(k), 43, srh(41, list, 1, inner)))
}

func eth(env *perf.Env, l3 []byte) []byte {
	b := append(append([]byte{}, env.InMAC...), env.TxMAC...)
	return append(append(b, 0x86, 0xdd), l3...)
}

func ipv6(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// srh builds an SRH (list in Segment List order) followed by payload.
func srh(nh uint8, list []netip.Addr, sl uint8, payload []byte) []byte {
	b := []byte{nh, uint8(2 * len(list)), 4, sl, uint8(len(list) - 1), 0, 0, 0}
	for _, a := range list {
		x := a.As16()
		b = append(b, x[:]...)
	}
	return append(b, payload...)
}

// udp is a UDP header (port 1024 -> 9) + n bytes of payload.
func udp(n int) []byte {
	n = max(n, 0)
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint16(b[0:], 1024)
	binary.BigEndian.PutUint16(b[2:], 9)
	binary.BigEndian.PutUint16(b[4:], uint16(8+n))
	return b
}

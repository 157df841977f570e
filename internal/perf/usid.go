package perf

import (
	"fmt"
	"net/netip"
)

// Compressed SIDs (sid.format f3216, docs/usid.md): the three kinds of
// node a 5-function chain with an egress crosses, each in both forms — the
// headend, a function in the middle of the chain and the decapsulating
// egress — as single-SUT recipes. A chain's cost is headend + 5 × function
// + egress; examples/perf/usid.yaml measures all six arms in one run.
//
// Full: 6 SIDs in an SRH (40 + 8 + 6 × 16 = 144 bytes of headers). F3216:
// one container in the destination address, no SRH (40 bytes).

// usidBlock is the F3216 block of the recipes; uSIDs 0xf000.. are routed
// to the rx port (the functions after the SUT's).
var usidBlock = netip.MustParsePrefix("fcbb:bb00::/32")

// usidAddr is block:v0:v1:...: a container with the given uSIDs.
func usidAddr(vs ...uint16) netip.Addr {
	b := usidBlock.Addr().As16()
	for i, v := range vs {
		b[4+2*i], b[5+2*i] = byte(v>>8), byte(v)
	}
	return netip.AddrFrom16(b)
}

func usidRoutes(env *Env) error {
	return runAll(env, []string{"ip", "-6", "route", "replace", "fcbb:bb00:f000::/36", "via", TesterRx6, "dev", env.Out})
}

// chainFull is the 6-SID path of the full chain with the SUT's SID at
// position at (0-based), the others far SIDs.
func chainFull(k, at int) []netip.Addr {
	var path []netip.Addr
	for i := 0; i < 6; i++ {
		if i == at {
			path = append(path, Addr("sid", k, 1))
		} else {
			path = append(path, Addr("far", k, i+1))
		}
	}
	return path
}

// USIDRecipes are the compressed-chain arms.
func USIDRecipes() []Recipe {
	return []Recipe{
		nativeRecipe{"chain5.headend", "headend of a 5-function chain + egress: encap, 6 SIDs in an SRH", headend("encap", 6)},
		nativeRecipe{"chain5.headend.usid", "the same chain as one F3216 container: encap.red, no SRH", func(env *Env, k int, p Params) ([]byte, error) {
			if err := usidRoutes(env); err != nil {
				return nil, err
			}
			c := usidAddr(0xf001, 0xf002, 0xf003, 0xf004, 0xf005, 0xf006)
			pfx := netip.PrefixFrom(Addr("hx", k, 0), 48).String()
			if err := runAll(env, []string{"ip", "-6", "route", "replace", pfx, "encap", "seg6", "mode", "encap.red",
				"segs", c.String(), "dev", env.Out}); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("hx", k, 1), p.Size)
			if err != nil {
				return nil, err
			}
			return frame6(env, in), nil
		}},
		nativeRecipe{"chain5.End", "End at the 3rd of 6 SIDs in an SRH (SL 3)", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End"); err != nil {
				return nil, err
			}
			return EndFrame(env, k, p, 3, chainFull(k, 2), false)
		}},
		nativeRecipe{"chain5.End.usid", "End flavors next-csid at the 3rd of 6 uSIDs of a container (no SRH): shift", func(env *Env, k int, p Params) ([]byte, error) {
			if err := usidRoutes(env); err != nil {
				return nil, err
			}
			me := uint16(0x1000 + k)
			if err := runAll(env, []string{"ip", "-6", "route", "replace", fmt.Sprintf("%s/48", usidAddr(me)),
				"encap", "seg6local", "action", "End", "flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", env.In}); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			if err != nil {
				return nil, err
			}
			return frame6(env, ipv6(src6, usidAddr(me, 0xf004, 0xf005, 0xf006), protoIPv6, in)), nil
		}},
		nativeRecipe{"chain5.End.DX6", "End.DX6 as the last of 6 SIDs in an SRH (SL 0)", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.DX6", "nh6", farNH6.String()); err != nil {
				return nil, err
			}
			return EndFrame(env, k, p, 0, chainFull(k, 5), false)
		}},
		nativeRecipe{"chain5.End.DX6.usid", "End.DX6 at the last uSID of a container (no SRH)", func(env *Env, k int, p Params) ([]byte, error) {
			me := uint16(0x2000 + k)
			if err := runAll(env, []string{"ip", "-6", "route", "replace", fmt.Sprintf("%s/48", usidAddr(me)),
				"encap", "seg6local", "action", "End.DX6", "nh6", farNH6.String(), "dev", env.In}); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			if err != nil {
				return nil, err
			}
			return frame6(env, ipv6(src6, usidAddr(me), protoIPv6, in)), nil
		}},
	}
}

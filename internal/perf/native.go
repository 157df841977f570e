package perf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// nativeRecipe is a recipe for a behaviour the kernel implements.
type nativeRecipe struct {
	name, desc string
	setup      func(env *Env, k int, p Params) ([]byte, error)
}

// NewRecipe makes a Recipe of a setup function (packages that add recipes:
// the proxies', the firewall's). Setup gets Size defaulted to 64 and its
// errors prefixed with the recipe's name.
func NewRecipe(name, desc string, setup func(env *Env, k int, p Params) ([]byte, error)) Recipe {
	return nativeRecipe{name, desc, setup}
}

func (r nativeRecipe) Name() string     { return r.name }
func (r nativeRecipe) Describe() string { return r.desc }
func (r nativeRecipe) Setup(env *Env, k int, p Params) ([]byte, error) {
	if p.Size == 0 {
		p.Size = 64
	}
	b, err := r.setup(env, k, p)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", r.name, err)
	}
	return b, nil
}

// EndFrame is the thesis' endpoint packet as a frame for the SUT's input
// port: outer IPv6 + SRH carrying segs (visiting order) with Segments Left
// sl + the inner UDP packet of p.Size bytes (IPv6, or IPv4 when v4).
func EndFrame(env *Env, k int, p Params, sl int, segs []netip.Addr, v4 bool) ([]byte, error) {
	if v4 {
		in, err := plain4(src4, Addr4(k, 1), p.Size)
		if err != nil {
			return nil, err
		}
		b, err := encap6(src6, segs, sl, protoIPv4, in)
		return frame6e(env, b, err)
	}
	in, err := plain6(src6, Addr("dst", k, 1), p.Size)
	if err != nil {
		return nil, err
	}
	b, err := encap6(src6, segs, sl, protoIPv6, in)
	return frame6e(env, b, err)
}

// transitSRv6 is an End packet: SID active, SL 1, next the final destination.
func transitSRv6(env *Env, k int, p Params) ([]byte, error) {
	return EndFrame(env, k, p, 1, []netip.Addr{Addr("sid", k, 1), Addr("dst", k, 1)}, false)
}

// decapFrame: the SID is the last segment (SL 0), as End.DX*/End.DT* need.
func decapFrame(env *Env, k int, p Params, v4 bool) ([]byte, error) {
	return EndFrame(env, k, p, 0, []netip.Addr{Addr("far", k, 9), Addr("sid", k, 1)}, v4)
}

func sidRoute(env *Env, k int, behaviour ...string) error {
	args := append([]string{"ip", "-6", "route", "replace", Addr("sid", k, 1).String() + "/128",
		"encap", "seg6local", "action"}, behaviour...)
	return runAll(env, append(args, "dev", env.In))
}

func headend(mode string, nsegs int) func(env *Env, k int, p Params) ([]byte, error) {
	return func(env *Env, k int, p Params) ([]byte, error) {
		segs := ""
		for i := 1; i <= nsegs; i++ {
			if i > 1 {
				segs += ","
			}
			segs += Addr("far", k, i).String()
		}
		pfx := netip.PrefixFrom(Addr("hx", k, 0), 48).String()
		if err := runAll(env, []string{"ip", "-6", "route", "replace", pfx, "encap", "seg6", "mode", mode,
			"segs", segs, "dev", env.Out}); err != nil {
			return nil, err
		}
		in, err := plain6(src6, Addr("hx", k, 1), p.Size)
		if err != nil {
			return nil, err
		}
		return frame6(env, in), nil
	}
}

// NativeRecipes returns the recipes of the kernel's own behaviours
// (thesis Table 5.1 and the reduced/B6 variants).
func NativeRecipes() []Recipe {
	return []Recipe{
		nativeRecipe{"IPv6", "plain IPv6 forwarding (the reference)", func(env *Env, k int, p Params) ([]byte, error) {
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			return frame6(env, in), err
		}},
		nativeRecipe{"IPv4", "plain IPv4 forwarding", func(env *Env, k int, p Params) ([]byte, error) {
			in, err := plain4(src4, Addr4(k, 1), p.Size)
			return frame4(env, in), err
		}},
		nativeRecipe{"SRv6-transit", "an SRv6 packet forwarded by a node that is not its active SID", func(env *Env, k int, p Params) ([]byte, error) {
			return EndFrame(env, k, p, 1, []netip.Addr{Addr("far", k, 1), Addr("dst", k, 1)}, false)
		}},
		nativeRecipe{"T.Encaps", "headend: encap seg6 mode encap, 2 SIDs", headend("encap", 2)},
		nativeRecipe{"T.Encaps.Red", "headend: encap seg6 mode encap.red, 2 SIDs", headend("encap.red", 2)},
		nativeRecipe{"T.Insert", "headend: encap seg6 mode inline, 2 SIDs", headend("inline", 2)},
		nativeRecipe{"T.Encaps.L2", "headend: encap seg6 mode l2encap, 2 SIDs", headend("l2encap", 2)},
		nativeRecipe{"T.Encaps.L2.Red", "headend: encap seg6 mode l2encap.red, 2 SIDs", headend("l2encap.red", 2)},
		nativeRecipe{"End", "seg6local End", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End"); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.X", "seg6local End.X nh6 behind a /128 gateway route", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.X", "nh6", farNH6.String()); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.X.onlink", "seg6local End.X with an on-link nh6 (route cache entry per packet)", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.X", "nh6", rxHop6.String()); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.T", "seg6local End.T, lookup in table 100+k", func(env *Env, k int, p Params) ([]byte, error) {
			t := strconv.Itoa(100 + k)
			if err := runAll(env, []string{"ip", "-6", "route", "replace", "fc00:100::/32", "via", TesterRx6, "dev", env.Out, "table", t}); err != nil {
				return nil, err
			}
			if err := sidRoute(env, k, "End.T", "table", t); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.DX2", "seg6local End.DX2 oif <out>: decap, send the inner frame", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.DX2", "oif", env.Out); err != nil {
				return nil, err
			}
			in, err := plain6(src6, Addr("dst", k, 1), p.Size)
			if err != nil {
				return nil, err
			}
			l2 := ether(env.RxMAC, env.OutMAC, etherIPv6, in)
			segs := []netip.Addr{Addr("far", k, 9), Addr("sid", k, 1)}
			b, err := encap6(src6, segs, 0, protoEthernet, l2)
			return frame6e(env, b, err)
		}},
		nativeRecipe{"End.DX4", "seg6local End.DX4 nh4 behind a /32 gateway route", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.DX4", "nh4", farNH4.String()); err != nil {
				return nil, err
			}
			return decapFrame(env, k, p, true)
		}},
		nativeRecipe{"End.DX6", "seg6local End.DX6 nh6 behind a /128 gateway route", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.DX6", "nh6", farNH6.String()); err != nil {
				return nil, err
			}
			return decapFrame(env, k, p, false)
		}},
		nativeRecipe{"End.DT6", "seg6local End.DT6, lookup in table 200+k", func(env *Env, k int, p Params) ([]byte, error) {
			t := strconv.Itoa(200 + k)
			if err := runAll(env, []string{"ip", "-6", "route", "replace", "fc00:100::/32", "via", TesterRx6, "dev", env.Out, "table", t}); err != nil {
				return nil, err
			}
			if err := sidRoute(env, k, "End.DT6", "table", t); err != nil {
				return nil, err
			}
			return decapFrame(env, k, p, false)
		}},
		nativeRecipe{"End.DT4", "seg6local End.DT4 vrftable (needs VRF)", vrfRecipe("End.DT4", true)},
		nativeRecipe{"End.DT46", "seg6local End.DT46 vrftable (needs VRF)", vrfRecipe("End.DT46", false)},
		nativeRecipe{"End.B6", "seg6local End.B6: insert a new SRH (1 SID)", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.B6", "srh", "segs", Addr("far", k, 1).String()); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.B6.Encaps", "seg6local End.B6.Encaps: End, then a new outer IPv6+SRH (1 SID)", func(env *Env, k int, p Params) ([]byte, error) {
			if err := sidRoute(env, k, "End.B6.Encaps", "srh", "segs", Addr("far", k, 1).String()); err != nil {
				return nil, err
			}
			return transitSRv6(env, k, p)
		}},
		nativeRecipe{"End.BPF", "seg6local End.BPF with a no-op program (cost of the hook)", endBPF},
	}
}

// vrfRecipe probes for VRF (End.DT4/End.DT46 need vrftable) and skips
// with the reason on kernels without it.
func vrfRecipe(action string, v4 bool) func(env *Env, k int, p Params) ([]byte, error) {
	return func(env *Env, k int, p Params) ([]byte, error) {
		dev := fmt.Sprintf("vrfp%d", k)
		t := strconv.Itoa(300 + k)
		if out, err := env.Run("ip", "link", "add", dev, "type", "vrf", "table", t); err != nil {
			return nil, fmt.Errorf("%w: %s needs a VRF device for vrftable and this kernel has none (%s)", ErrNotSupported, action, strings.TrimSpace(out))
		}
		rt := []string{"ip", "-6", "route", "replace", "fc00:100::/32", "via", TesterRx6, "dev", env.Out, "table", t}
		if v4 {
			rt = []string{"ip", "-4", "route", "replace", "10.100.0.0/16", "via", TesterRx4, "dev", env.Out, "table", t}
		}
		if err := runAll(env, []string{"ip", "link", "set", dev, "up"}, rt); err != nil {
			return nil, err
		}
		if err := sidRoute(env, k, action, "vrftable", t); err != nil {
			return nil, err
		}
		return decapFrame(env, k, p, v4)
	}
}

// endBPF loads the no-op lwt_seg6local program and binds it to the SID
// through netlink (the route keeps its own reference to the program).
func endBPF(env *Env, k int, p Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("%w: End.BPF needs a local SUT", ErrNotSupported)
	}
	var objs perfEndBPFObjects
	if err := loadPerfEndBPFObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("load End.BPF program: %w", err)
	}
	defer objs.Close()
	err := env.Do(func() error {
		ifi, err := netlink.LinkByName(env.In)
		if err != nil {
			return err
		}
		enc := &netlink.SEG6LocalEncap{Action: nl.SEG6_LOCAL_ACTION_END_BPF}
		enc.Flags[nl.SEG6_LOCAL_ACTION] = true
		enc.Flags[nl.SEG6_LOCAL_BPF] = true
		if err := enc.SetProg(objs.PerfEndbpf.FD(), "perf_endbpf"); err != nil {
			return err
		}
		sid := Addr("sid", k, 1)
		return netlink.RouteReplace(&netlink.Route{
			LinkIndex: ifi.Attrs().Index,
			Dst:       netipToIPNet(netip.PrefixFrom(sid, 128)),
			Encap:     enc,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("route End.BPF: %w", err)
	}
	return transitSRv6(env, k, p)
}

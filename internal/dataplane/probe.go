package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// List returns the features in a stable order.
func (f Features) List() []Feature {
	return []Feature{f.VRF, f.EndDT4, f.EndDT46, f.VRFTable, f.Counters, f.FlavorPSP,
		f.FlavorNextCSID, f.EndBPF, f.HMAC, f.L2Encap, f.EncapRed, f.L2EncapRed}
}

// Require returns nil when the feature is supported, else an error
// wrapping ErrNotSupported with the probe's reason.
func (f Feature) Require() error {
	if f.Supported {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", f.Name, f.Reason, ErrNotSupported)
}

const probeVRFTable = 4242

// Probe returns the kernel's features, probing once per Handle (see probe).
func (h *Handle) Probe() Features {
	h.probeOnce.Do(func() { h.probed = h.probe() })
	return h.probed
}

// Check returns nil when the kernel supports everything route r uses, or an
// error wrapping ErrNotSupported that names the missing feature and why.
func (f Features) Check(r nodestate.Route) error {
	need, err := f.needs(r)
	if err != nil {
		return err
	}
	for _, n := range need {
		if err := n.Require(); err != nil {
			return err
		}
	}
	return nil
}

// Explain is Check in the words apply's preflight and `segchain sid add`
// both use: nil when the kernel of node supports everything r uses, else
// an error wrapping ErrNotSupported that names what r is (its Owner, then
// the behaviour at the SID or the policy), the node and why. One sentence
// for both, so that a SID refused by hand reads as apply would refuse it.
func (f Features) Explain(r nodestate.Route, node string) error {
	err := f.Check(r)
	if err == nil {
		return nil
	}
	what := r.Dst.String()
	if r.Seg6Local != nil {
		what = r.Seg6Local.Action + " at " + what
	} else if r.Seg6 != nil {
		what = "the " + r.Seg6.Mode + " policy to " + what
	}
	if r.Owner != "" {
		what = r.Owner + ": " + what
	}
	if l := r.Seg6Local; l != nil && !f.VRF.Supported && (l.VRFTable != 0 || l.Action == "End.DT4" || l.Action == "End.DT46") {
		// The usual case, said the way the user knows it.
		return &unsupportedError{fmt.Sprintf("%s: needs VRF devices, which the kernel of node %s lacks (%s)", what, node, f.VRF.Reason)}
	}
	// The probe's reasons name its own throwaway routes: keep the
	// kernel's words only.
	reason := probeRouteRE.ReplaceAllString(err.Error(), "the kernel said: ")
	return &unsupportedError{fmt.Sprintf("%s: the kernel of node %s cannot do it (%s)", what, node, reason)}
}

// probeRouteRE matches "kernel rejected <the probe's route>: " in a
// feature's reason.
var probeRouteRE = regexp.MustCompile(`kernel rejected .*?: `)

// unsupportedError is Explain's sentence; it is ErrNotSupported (exit
// statuses and callers that degrade test for it).
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }
func (e *unsupportedError) Unwrap() error { return ErrNotSupported }

// NeedsProbe reports whether Check's answer for r depends on the probed
// features at all: false for a route that uses none of them (a static
// route, End, End.X, End.DX6, an encap policy), which any kernel segchain
// runs on installs, so that no probe is needed to check it.
func NeedsProbe(r nodestate.Route) bool {
	need, err := Features{}.needs(r)
	return err != nil || len(need) > 0
}

// needs lists the features of f that route r uses (an error: a flavor
// the kernel refuses or ignores, whatever it supports).
func (f Features) needs(r nodestate.Route) ([]Feature, error) {
	var need []Feature
	if e := r.Seg6; e != nil {
		switch e.Mode {
		case "l2encap":
			need = append(need, f.L2Encap)
		case "encap.red":
			need = append(need, f.EncapRed)
		case "l2encap.red":
			need = append(need, f.L2EncapRed)
		}
		if e.HMACKeyID != 0 {
			need = append(need, f.HMAC)
		}
	}
	if l := r.Seg6Local; l != nil {
		switch l.Action {
		case "End.DT4":
			need = append(need, f.EndDT4)
		case "End.DT46":
			need = append(need, f.EndDT46)
		case "End.BPF":
			need = append(need, f.EndBPF)
		}
		if l.VRFTable != 0 && l.Action == "End.DT6" {
			need = append(need, f.VRFTable)
		}
		if l.Action == "End.DT4" || l.Action == "End.DT46" || l.VRFTable != 0 {
			// The table they look up is a VRF device's: the behaviour's
			// own probe makes one, but a check must not lean on that.
			need = append(need, f.VRF)
		}
		if l.Count {
			need = append(need, f.Counters)
		}
		if l.HMAC != 0 {
			need = append(need, f.HMAC)
		}
		if err := checkFlavors(l); err != nil {
			return nil, err
		}
		for _, fl := range l.Flavors {
			switch fl {
			case "psp":
				need = append(need, f.FlavorPSP)
			case "next-csid":
				need = append(need, f.FlavorNextCSID)
			default:
				// usp and usd exist in the uapi but no kernel behaviour implements them.
				need = append(need, Feature{Name: "flavor " + fl, Reason: "no seg6local behaviour implements it"})
			}
		}
	}
	return need, nil
}

// flavorActions lists, per flavor, the behaviours whose kernel
// implementation takes SEG6_LOCAL_FLAVORS (net/ipv6/seg6_local.c: only End
// and End.X list it in their optional attributes; any other behaviour
// accepts the attribute and silently drops it, End.X rejects psp).
var flavorActions = map[string][]string{
	"psp":       {"End"},
	"next-csid": {"End", "End.X"},
}

// checkFlavors rejects flavor/behaviour pairs the kernel would refuse or
// silently ignore (an ignored flavor would also make every apply see a diff).
func checkFlavors(l *nodestate.Seg6Local) error {
	for _, fl := range l.Flavors {
		acts, ok := flavorActions[fl]
		if !ok {
			return fmt.Errorf("flavor %s: no seg6local behaviour implements it: %w", fl, ErrNotSupported)
		}
		if !slices.Contains(acts, l.Action) {
			return fmt.Errorf("flavor %s on %s: the kernel implements it only for %s: %w",
				fl, l.Action, strings.Join(acts, ", "), ErrNotSupported)
		}
	}
	return nil
}

// probe detects what the running kernel supports by trying each feature
// in a throwaway network namespace (the kernel is shared by every
// namespace, so the answer holds for the handle's namespace too). It never
// fails: a feature that cannot be tried is reported unsupported, with why.
// probePrefix names the throwaway namespaces of probe: the creating
// process's pid follows, so that one a killed process left behind (a
// deferred delete does not run on SIGKILL) is recognised and removed.
const probePrefix = "segchain-probe-"

// removeOrphanProbes deletes probe namespaces whose creating process is
// gone.
func removeOrphanProbes() {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), probePrefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil {
			continue // not of this naming: not ours to judge
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			_ = nsutil.Delete(e.Name())
		}
	}
}

func (h *Handle) probe() Features {
	f := Features{
		VRF: Feature{Name: "vrf"}, EndDT4: Feature{Name: "End.DT4"}, EndDT46: Feature{Name: "End.DT46"},
		VRFTable: Feature{Name: "vrftable"}, Counters: Feature{Name: "count"},
		FlavorPSP: Feature{Name: "flavor psp"}, FlavorNextCSID: Feature{Name: "flavor next-csid"},
		EndBPF: Feature{Name: "End.BPF"}, HMAC: Feature{Name: "seg6 hmac"},
		L2Encap: Feature{Name: "mode l2encap"}, EncapRed: Feature{Name: "mode encap.red"},
		L2EncapRed: Feature{Name: "mode l2encap.red"},
	}
	all := func(reason string) Features {
		for _, p := range []*Feature{&f.VRF, &f.EndDT4, &f.EndDT46, &f.VRFTable, &f.Counters,
			&f.FlavorPSP, &f.FlavorNextCSID, &f.EndBPF, &f.HMAC, &f.L2Encap, &f.EncapRed, &f.L2EncapRed} {
			p.Reason = reason
		}
		return f
	}
	removeOrphanProbes()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("%s%d-%s", probePrefix, os.Getpid(), hex.EncodeToString(b))
	if err := nsutil.Create(name); err != nil {
		return all("cannot create a probe namespace: " + err.Error())
	}
	defer nsutil.Delete(name)
	p, err := Open(name)
	if err != nil {
		return all("cannot open the probe namespace: " + err.Error())
	}
	defer p.Close()
	p.isProbe = true
	if lo, err := p.nh.LinkByName("lo"); err == nil {
		_ = p.nh.LinkSetUp(lo)
	}

	sid := 0
	try := func(ft *Feature, r nodestate.Route) bool {
		sid++
		r.Dst = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfc, 0, 0xff, 0xff, 14: byte(sid >> 8), 15: byte(sid)}), 128)
		if err := p.replaceRoute(r, nodestate.Proto); err != nil { // not ReplaceRoute: it would Probe again
			ft.Reason = "kernel rejected " + r.String() + ": " + errors.Unwrap(err).Error()
			return false
		}
		ft.Supported = true
		return true
	}
	local := func(l nodestate.Seg6Local) nodestate.Route { return nodestate.Route{Seg6Local: &l} }
	seg := netip.MustParseAddr("fc00:ffff::100")
	encap := func(mode string) nodestate.Route {
		return nodestate.Route{Dev: "lo", Seg6: &nodestate.Seg6Encap{Mode: mode, Segs: []netip.Addr{seg}}}
	}

	// VRF: the vrf link kind is what End.DT4/End.DT46/vrftable need at packet time.
	if err := p.nh.LinkAdd(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "probevrf"}, Table: probeVRFTable}); err != nil {
		f.VRF.Reason = "cannot create a vrf device (CONFIG_NET_VRF missing, no loadable modules): " + err.Error()
	} else {
		f.VRF.Supported = true
	}
	for _, c := range []struct {
		ft *Feature
		l  nodestate.Seg6Local
	}{
		{&f.EndDT4, nodestate.Seg6Local{Action: "End.DT4", VRFTable: probeVRFTable}},
		{&f.EndDT46, nodestate.Seg6Local{Action: "End.DT46", VRFTable: probeVRFTable}},
		{&f.VRFTable, nodestate.Seg6Local{Action: "End.DT6", VRFTable: probeVRFTable}},
	} {
		accepted := try(c.ft, local(c.l))
		if f.VRF.Supported {
			continue
		}
		if accepted {
			c.ft.Supported = false
			c.ft.Reason = "the route is accepted but packets need a vrf device bound to the table, and " + f.VRF.Reason
		} else {
			c.ft.Reason = "needs a vrf device bound to the table: " + f.VRF.Reason + "; " + c.ft.Reason
		}
	}

	if try(&f.Counters, local(nodestate.Seg6Local{Action: "End", Count: true})) {
		// Accepted is not enough: the dump must carry the counters back.
		f.Counters.Supported, f.Counters.Reason = false, "route accepted but no SEG6_LOCAL_COUNTERS in the dump"
		if sids, err := p.LocalSIDs(); err == nil {
			for _, s := range sids {
				if s.Counters != nil {
					f.Counters.Supported, f.Counters.Reason = true, ""
				}
			}
		}
	}
	try(&f.FlavorPSP, local(nodestate.Seg6Local{Action: "End", Flavors: []string{"psp"}}))
	try(&f.FlavorNextCSID, local(nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}}))
	try(&f.L2Encap, encap("l2encap"))
	try(&f.EncapRed, encap("encap.red"))
	try(&f.L2EncapRed, encap("l2encap.red"))

	// End.BPF: a two-instruction lwt_seg6local program ("return BPF_OK").
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.LWTSeg6Local,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		f.EndBPF.Reason = "cannot load an lwt_seg6local program: " + err.Error()
	} else {
		defer prog.Close()
		e := &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End.BPF", BPF: "probe"}, BPFFd: prog.FD()}
		if err := p.replaceEncap(netip.MustParsePrefix("fc00:ffff::bbbb/128"), e); err != nil {
			f.EndBPF.Reason = "kernel rejected End.BPF: " + err.Error()
		} else {
			f.EndBPF.Supported = true
		}
	}

	if err := p.SetHMACKey(nodestate.HMACKey{ID: 4242, Alg: "sha256", Secret: []byte("probe")}); err != nil {
		f.HMAC.Reason = err.Error()
	} else {
		f.HMAC.Supported = true
	}
	return f
}

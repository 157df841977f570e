package userspace

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// Extension plugs the bindings into `segchain sid` (localsid.Extension).
type Extension struct{}

// Behaviors: a binding shows as "userspace" (an SR-aware service) or
// "End.ASM" (the shared-memory proxy).
func (Extension) Behaviors() []string { return []string{"userspace", "End.ASM"} }

// Add refuses: a SID is bound by the process that serves it.
func (Extension) Add(string, netip.Prefix, string, []string) error {
	return errors.New("a userspace service or End.ASM SID is bound by its process (Go package pkg/srv6svc, or an example in examples/services): see docs/userspace.md")
}

// Del removes the binding holding sid when no process serves it.
func (e Extension) Del(netns string, sid netip.Prefix) (bool, error) { return e.DelBinding(netns, sid) }

// DelBinding is Del; `segchain sid del` calls it before looking at
// hand-made SIDs, since a binding is made by its process, not by sid add.
func (Extension) DelBinding(netns string, sid netip.Prefix) (bool, error) {
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return false, err
	}
	for _, b := range bs {
		for _, p := range b.SIDs {
			if p == sid {
				return true, srv6svc.Unbind(netns, b.Name)
			}
		}
	}
	return false, nil
}

// Show lists one entry per bound SID.
func (Extension) Show(netns string) ([]localsid.Entry, error) {
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return nil, err
	}
	var out []localsid.Entry
	for _, b := range bs {
		for _, p := range b.SIDs {
			out = append(out, Entry(b, p))
		}
	}
	return out, nil
}

// Entry is the `sid show` line of sid in binding b.
func Entry(b srv6svc.Binding, sid netip.Prefix) localsid.Entry {
	beh := "userspace"
	if b.Kind == "End.ASM" {
		beh = "End.ASM"
	}
	mode := "sync"
	if b.Batch {
		mode = "batch"
	}
	params := map[string]string{"name": b.Name, "state": b.State, "on-failure": b.OnFailure,
		"queues": strconv.Itoa(b.Queues), "serve": mode}
	for _, kv := range strings.Fields(b.Mode) { // xdp=IF:MODE,... xsk=MODE
		if k, v, ok := strings.Cut(kv, "="); ok {
			params[k] = v
		}
	}
	if b.PID != 0 {
		params["pid"] = strconv.Itoa(b.PID)
	}
	if b.USID != "" {
		params["usid"] = b.USID // a uSID (block:uSID prefix): no ARGS
	} else if sid.Bits() < 128 {
		params["args-bits"] = strconv.Itoa(128 - sid.Bits())
	}
	c := b.Counters
	return localsid.Entry{SID: sid, Behavior: beh, Params: params, Extra: b, Counters: map[string]uint64{
		"packets": c.Steered, "bytes": c.SteeredBytes, "rx": c.RX, "tx": c.TX,
		"drop-verdict": c.DropVerdict, "drop-malformed": c.DropMalformed, "drop-tx-full": c.DropTxFull,
		"nosocket-drop": c.NoSocketDrop, "nosocket-bypass": c.NoSocketBypass, "too-big": c.TooBig, "modified": c.Modified,
		"csid-padding": c.CSIDPadding, "drop-hop-limit": c.DropHopLimit,
	}}
}

// Flush removes every binding whose process is gone.
func (Extension) Flush(netns string) error {
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range bs {
		if b.State != "serving" {
			errs = append(errs, srv6svc.Unbind(netns, b.Name))
		}
	}
	return errors.Join(errs...)
}

// ClearCounters is not supported: the counters of a binding are its
// process's and the kernel's since the binding was made.
func (Extension) ClearCounters(netns string, sid *netip.Prefix) error {
	if sid == nil {
		return nil // nothing to do for the whole node: say so only for one SID
	}
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return err
	}
	for _, b := range bs {
		for _, p := range b.SIDs {
			if p == *sid {
				return fmt.Errorf("sid %s: userspace service counters cannot be cleared (they count since the binding)", sid)
			}
		}
	}
	return nil
}

// Help is the behaviour's entry in `segchain sid --help`.
func (Extension) Help(behavior string) string {
	what := "an SR-aware userspace service"
	if behavior == "End.ASM" {
		what = "End.ASM, the shared-memory SR proxy"
	}
	return behavior + " (shown, not added)\n      " + what + " bound by its own process over AF_XDP (pkg/srv6svc);\n" +
		"      sid show lists state, queues, modes, counters; del/flush remove a dead binding (docs/userspace.md)"
}

package firewall

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/fwrule"
)

// The edits `segchain fw` makes to an instance's rule set. Each changes
// the Instance only; Edit installs the result.

// Edit applies change to the instance at sid in netns and installs the
// result atomically (read-modify-write: the caller holds the node's lock).
// It returns the instance as installed.
func Edit(netns string, sid netip.Prefix, change func(*Instance) error) (Instance, error) {
	in, ok, err := Get(netns, sid)
	if err != nil {
		return Instance{}, err
	}
	if !ok {
		return Instance{}, fmt.Errorf("no %s instance at %s in netns %q: create it with segchain sid add %s %s", Behavior, sid, netns, sid, Behavior)
	}
	if err := change(&in); err != nil {
		return Instance{}, err
	}
	if err := Apply(netns, in); err != nil {
		return Instance{}, err
	}
	return in, nil
}

// parseRule reads one rule in ip6tables syntax (-4: iptables syntax).
func parseRule(words []string) (fwrule.Rule, error) {
	if len(words) == 0 {
		return fwrule.Rule{}, errors.New("no rule given")
	}
	return fwrule.Parse(words, fwrule.IPv6)
}

// AppendRule adds the rule words describe after the last.
func (in *Instance) AppendRule(words []string) error {
	r, err := parseRule(words)
	if err != nil {
		return err
	}
	in.Rules = append(in.Rules, r)
	return nil
}

// InsertRule puts the rule words describe at position pos (1 = first);
// the rule there and those after it move down.
func (in *Instance) InsertRule(pos int, words []string) error {
	if pos < 1 || pos > len(in.Rules)+1 {
		return fmt.Errorf("position %d: the instance has %d rules", pos, len(in.Rules))
	}
	r, err := parseRule(words)
	if err != nil {
		return err
	}
	in.Rules = append(in.Rules[:pos-1], append([]fwrule.Rule{r}, in.Rules[pos-1:]...)...)
	return nil
}

// DeleteRule removes the rule at position pos (1 = first).
func (in *Instance) DeleteRule(pos int) error {
	if pos < 1 || pos > len(in.Rules) {
		return fmt.Errorf("position %d: the instance has %d rules", pos, len(in.Rules))
	}
	in.Rules = append(in.Rules[:pos-1], in.Rules[pos:]...)
	return nil
}

// SetArg makes action (go-next, drop, reject, skip-next, go-last; "none"
// removes the value) what eval-args does for ARGS value v. The first
// change copies the default table, keeping the values ArgsBits can carry.
func (in *Instance) SetArg(v uint32, action string) error {
	if in.Args == nil {
		in.Args = fwrule.DefaultArgs()
		for k := range in.Args {
			if in.ArgsBits < 32 && uint64(k) >= 1<<in.ArgsBits {
				delete(in.Args, k)
			}
		}
	}
	if strings.EqualFold(action, "none") {
		delete(in.Args, v)
		return nil
	}
	k, err := fwrule.ParseTargetKind(action)
	if err != nil {
		return err
	}
	in.Args[v] = k
	return nil
}

// ListAt is List, only the instance at sid when sid is not nil (an error
// when there is none).
func ListAt(netns string, sid *netip.Prefix) ([]Status, error) {
	sts, err := List(netns)
	if err != nil || sid == nil {
		return sts, err
	}
	var keep []Status
	for _, s := range sts {
		if s.Instance.SID == *sid {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("no %s instance at %s", Behavior, *sid)
	}
	return keep, nil
}

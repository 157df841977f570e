package netfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/service/netfilter"
)

// NodeKind is the netfilter kind's node half (local.ServiceKind): the
// End.AN.NF SIDs of a namespace and the rule sets loaded with them.
type NodeKind struct{}

// Name is the kind's name.
func (NodeKind) Name() string { return netfilter.Name }

// SIDExtension is the kind's `segchain sid` syntax.
func (NodeKind) SIDExtension() localsid.Extension { return Extension{} }

// AttachNew attaches nf_in to interfaces created since.
func (NodeKind) AttachNew(netns string) error { return AttachNew(netns) }

// rulesetFile records the rule set a service loaded (the text and its
// tables): observe finds the tables again by these names.
func rulesetFile(netns string, sid netip.Prefix) (string, error) {
	name, _, err := nsDir(netns, false)
	if err != nil {
		return "", err
	}
	s := strings.NewReplacer(":", "-", "/", "_").Replace(sid.Masked().String())
	return filepath.Join(lockRoot, name, s+".json"), nil
}

type loaded struct {
	Ruleset string   `json:"ruleset"`
	Tables  []string `json:"tables"`
}

func readLoaded(netns string, sid netip.Prefix) (loaded, bool, error) {
	var l loaded
	f, err := rulesetFile(netns, sid)
	if err != nil {
		return l, false, err
	}
	b, err := os.ReadFile(f)
	if errors.Is(err, os.ErrNotExist) {
		return l, false, nil
	}
	if err != nil {
		return l, false, err
	}
	return l, true, json.Unmarshal(b, &l)
}

func writeLoaded(netns string, sid netip.Prefix, l loaded) error {
	f, err := rulesetFile(netns, sid)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(l)
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f)
}

// nft runs nft with script on stdin inside netns.
func nft(netns, script string, args ...string) (string, error) {
	var out bytes.Buffer
	err := nsutil.Do(netns, func() error {
		cmd := exec.Command("nft", args...)
		cmd.Stdin = strings.NewReader(script)
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd.Run()
	})
	if err != nil {
		return out.String(), fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// tablesPresent returns which of tables ("FAMILY NAME") exist in netns.
func tablesPresent(netns string, tables []string) (map[string]bool, error) {
	out, err := nft(netns, "", "list", "tables")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "table" {
			have[f[1]+" "+f[2]] = true
		}
	}
	got := map[string]bool{}
	for _, t := range tables {
		got[t] = have[t]
	}
	return got, nil
}

// replaceTables deletes tables and loads text after them in one nft
// transaction (all or nothing). "table X" first makes the delete succeed
// whether X exists or not.
func replaceTables(netns string, tables []string, text string) error {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "table %s\ndelete table %s\n", t, t)
	}
	if text != "" {
		b.WriteString(text + "\n")
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := nft(netns, b.String(), "-f", "-")
	return err
}

// except returns the tables not in keep.
func except(tables []string, keep map[string]bool) []string {
	var out []string
	for _, t := range tables {
		if !keep[t] {
			out = append(out, t)
		}
	}
	return out
}

// missing returns the tables of sid's loaded rule set that are gone from
// the node (none when it loaded none).
func missing(netns string, sid netip.Prefix) ([]string, error) {
	l, ok, err := readLoaded(netns, sid)
	if err != nil || !ok {
		return nil, err
	}
	have, err := tablesPresent(netns, l.Tables)
	if err != nil {
		return nil, err
	}
	return except(l.Tables, have), nil
}

// Observe reads the End.AN.NF SIDs of netns with the rule sets they
// loaded (a rule set whose tables are gone is reported by Faults).
func (NodeKind) Observe(netns string) ([]nodestate.Service, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []nodestate.Service
	for _, st := range sts {
		sp := netfilter.Spec{SID: st.SID, ArgsBits: st.ArgsBits, CSIDLBLen: st.CSIDLBLen, CSIDNFLen: st.CSIDNFLen}
		l, ok, err := readLoaded(netns, st.SID)
		if err != nil {
			return nil, err
		}
		if ok {
			sp.Ruleset, sp.Tables = l.Ruleset, l.Tables
		}
		out = append(out, sp.Service())
	}
	return out, nil
}

// Faults lists missing pieces: a loaded rule set's table, the loop's
// policy rules.
func (NodeKind) Faults(netns string) ([]string, error) {
	sts, err := List(netns)
	if err != nil || len(sts) == 0 {
		return nil, err
	}
	var out []string
	for _, st := range sts {
		gone, err := missing(netns, st.SID)
		if err != nil {
			return nil, err
		}
		for _, t := range gone {
			out = append(out, fmt.Sprintf("netfilter %s: table %s of its rule set is missing", st.SID, t))
		}
	}
	var n int
	err = nsutil.Do(netns, func() error {
		nh, err := newHandle()
		if err != nil {
			return err
		}
		defer nh.Close()
		n, err = loopRules(nh)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n != 2 {
		out = append(out, fmt.Sprintf("netfilter loop: %d of its 2 policy rules (iif %s lookup %d)", n, LoopIn, Table))
	}
	return out, nil
}

// Repair forgets the loaded rule sets whose tables are missing (Apply
// loads them again); the loop is rebuilt by every Apply.
func (NodeKind) Repair(netns string) error {
	sts, err := List(netns)
	if err != nil {
		return err
	}
	for _, st := range sts {
		gone, err := missing(netns, st.SID)
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			f, err := rulesetFile(netns, st.SID)
			if err != nil {
				return err
			}
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// Apply installs every wanted SID and its rule set (reloaded when its
// text changed), then removes the SIDs of old no longer wanted with their
// rule sets' tables. Hand-made SIDs are never in old.
func (NodeKind) Apply(netns string, want, old []nodestate.Service, _ map[netip.Prefix]string) error {
	keep := map[netip.Prefix]bool{}
	keepTables := map[string]bool{}
	for _, s := range want {
		sp, err := netfilter.SpecOf(s)
		if err != nil {
			return err
		}
		for _, t := range sp.Tables {
			keepTables[t] = true
		}
		keep[sp.SID.Masked()] = true
	}
	for _, s := range want {
		sp, _ := netfilter.SpecOf(s)
		l, ok, err := readLoaded(netns, sp.SID)
		if err != nil {
			return err
		}
		if !ok || l.Ruleset != sp.Ruleset {
			// The old text's tables no service keeps, and the new
			// text's, go; the new text comes: one transaction.
			del := append(except(l.Tables, keepTables), sp.Tables...)
			if err := replaceTables(netns, del, sp.Ruleset); err != nil {
				return fmt.Errorf("netfilter %s: load rule set: %w", sp.SID, err)
			}
		}
		// The SID after its rules: no packet meets an empty rule set.
		if err := Apply(netns, Instance{SID: sp.SID, ArgsBits: sp.ArgsBits, CSIDLBLen: sp.CSIDLBLen, CSIDNFLen: sp.CSIDNFLen}); err != nil {
			return fmt.Errorf("netfilter %s: %w", sp.SID, err)
		}
		if err := writeLoaded(netns, sp.SID, loaded{Ruleset: sp.Ruleset, Tables: sp.Tables}); err != nil {
			return err
		}
	}
	for _, s := range old {
		if keep[s.SID.Masked()] {
			continue
		}
		// The record first: removing the last SID removes the records.
		l, ok, err := readLoaded(netns, s.SID)
		if err != nil {
			return err
		}
		if _, err := Remove(netns, s.SID); err != nil {
			return fmt.Errorf("remove netfilter %s: %w", s.SID, err)
		}
		if ok {
			if err := replaceTables(netns, except(l.Tables, keepTables), ""); err != nil {
				return fmt.Errorf("remove netfilter %s: %w", s.SID, err)
			}
			f, _ := rulesetFile(netns, s.SID)
			_ = os.Remove(f)
		}
	}
	return nil
}

// Capacity: at most MaxSIDs End.AN.NF SIDs per node.
func (NodeKind) Capacity(_ string, want []nodestate.Service) error {
	if len(want) > MaxSIDs {
		return fmt.Errorf("netfilter: %d End.AN.NF SIDs, at most %d per node", len(want), MaxSIDs)
	}
	return nil
}

// Counters reports every End.AN.NF SID as a local SID.
func (NodeKind) Counters(netns string) ([]agent.SIDCounters, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []agent.SIDCounters
	for _, st := range sts {
		e := EntryOf(st)
		d := map[string]uint64{}
		for k, v := range e.Counters {
			if k != "packets" && k != "bytes" && k != "errors" {
				d[k] = v
			}
		}
		out = append(out, agent.SIDCounters{SID: st.SID, Behavior: Behavior,
			Route: netfilter.Spec{SID: st.SID, ArgsBits: st.ArgsBits, CSIDLBLen: st.CSIDLBLen, CSIDNFLen: st.CSIDNFLen}.String(), Owned: true, Counted: true,
			Packets: st.Counters.Packets, Bytes: st.Counters.Bytes, Errors: st.Counters.Malformed + st.Counters.DroppedNetfilter, Detail: d})
	}
	return out, nil
}

// Purge removes every End.AN.NF SID of netns, its loop and the records of
// the rule sets it loaded (Flush), before the namespace is deleted.
func (NodeKind) Purge(netns string) error { return Flush(netns) }

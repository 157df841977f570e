package datapath

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pool"
)

// StateRoot keeps, per namespace, the pool specs the selector was
// programmed with (observe reads them back; the health checker reads its
// targets from them) and the checker's health report.
const StateRoot = "/run/segchain/pool"

// NodeKind is the pool kind's node half (local.ServiceKind).
type NodeKind struct{}

// Name is the kind's name.
func (NodeKind) Name() string { return pool.Name }

// SIDExtension: no hand-made pools.
func (NodeKind) SIDExtension() localsid.Extension { return nil }

func stateFile(netns, suffix string) (string, error) {
	name, _, err := bpfpin.Namespace(netns)
	if err != nil {
		return "", err
	}
	return filepath.Join(StateRoot, name+suffix), nil
}

// Specs are the pools programmed in netns, in pool-id order.
func Specs(netns string) ([]pool.Spec, error) {
	f, err := stateFile(netns, ".json")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(f)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []pool.Spec
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("read %s: %w", f, err)
	}
	return out, nil
}

func writeJSON(f string, v any) error {
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// A temporary file of its own per writer: the checker's goroutines
	// and its loop write the report concurrently.
	tf, err := os.CreateTemp(filepath.Dir(f), filepath.Base(f)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tf.Write(b)
	if err := errors.Join(werr, tf.Close()); err != nil {
		os.Remove(tf.Name())
		return err
	}
	return os.Rename(tf.Name(), f)
}

// Observe returns the pools programmed in netns.
func (NodeKind) Observe(netns string) ([]nodestate.Service, error) {
	specs, err := Specs(netns)
	if err != nil {
		return nil, err
	}
	return pool.EncodeSpecs(specs), nil
}

// Faults: pools recorded but the selector's pins gone.
func (NodeKind) Faults(netns string) ([]string, error) {
	specs, err := Specs(netns)
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	_, dir, err := prog.Dir(netns, false, nil)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "pool_sids")); err != nil {
		return []string{fmt.Sprintf("pool selector: %d pools recorded, maps not pinned in %s", len(specs), dir)}, nil
	}
	// pool_in on every interface: a packet that arrives where it is not
	// is never chosen for (the chain's own route: the placeholder).
	if missing, err := unattached(netns, dir); err != nil {
		return nil, err
	} else if len(missing) > 0 {
		return []string{fmt.Sprintf("pool selector: pool_in not attached to %s", strings.Join(missing, ", "))}, nil
	}
	// A marked packet whose rule is gone would fall to the chain's own
	// route (the placeholder): no failover.
	if missing, err := missingRules(netns, specs); err != nil {
		return nil, err
	} else if missing > 0 {
		return []string{fmt.Sprintf("pool selector: %d per-instance rules missing (marked packets would go to the placeholder)", missing)}, nil
	}
	// So would the headend's own packets without their local table's route.
	if missing, err := missingLocalRoutes(netns, specs); err != nil {
		return nil, err
	} else if missing > 0 {
		return []string{fmt.Sprintf("pool selector: %d local tables without their route (the headend's own packets would go to the placeholder)", missing)}, nil
	}
	return nil, nil
}

// Repair forgets the record so that apply programs the pools again.
func (NodeKind) Repair(netns string) error {
	f, err := stateFile(netns, ".json")
	if err != nil {
		return err
	}
	if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// order sorts specs by placeholder: a pool's id is its index.
func order(want []nodestate.Service) ([]pool.Spec, error) {
	var specs []pool.Spec
	for _, s := range want {
		sp, err := pool.SpecOf(s)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Pool.Placeholder.Less(specs[j].Pool.Placeholder) })
	return specs, nil
}

// Apply programs want's pools (the selector attached on every interface)
// or removes the selector when there are none.
func (NodeKind) Apply(netns string, want, _ []nodestate.Service, _ map[netip.Prefix]string) error {
	f, err := stateFile(netns, ".json")
	if err != nil {
		return err
	}
	if len(want) == 0 {
		if err := Remove(netns); err != nil {
			return err
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	specs, err := order(want)
	if err != nil {
		return err
	}
	h, err := Open(netns)
	if err != nil {
		return err
	}
	defer h.Close()
	pools := make([]pool.Pool, len(specs))
	for i, sp := range specs {
		pools[i] = sp.Pool
	}
	if err := h.Program(pools); err != nil {
		return err
	}
	if err := Select(netns, h, specs); err != nil {
		return err
	}
	return writeJSON(f, specs)
}

// Select programs the selection at ingress: the per-instance tables and
// their rules first, then the classifier that marks packets into them.
func Select(netns string, h *Headend, specs []pool.Spec) error {
	if _, err := entries(specs); err != nil {
		return err
	}
	if err := syncKernel(netns, specs, h.local); err != nil {
		return err
	}
	return h.ProgramRules(specs)
}

// Capacity: at most pool.MaxPools per headend.
func (NodeKind) Capacity(_ string, want []nodestate.Service) error {
	if len(want) > pool.MaxPools {
		return fmt.Errorf("pool: %d pools at one headend, at most %d", len(want), pool.MaxPools)
	}
	specs, err := order(want)
	if err != nil {
		return err
	}
	_, err = entries(specs)
	return err
}

// Counters reports each pool as a local SID (its placeholder): packets
// per instance (inst-NAME), moved, bypass and drop in the detail.
func (NodeKind) Counters(netns string) ([]agent.SIDCounters, error) {
	specs, err := Specs(netns)
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	h, err := Reopen(netns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	// The liveness words first, the report after: the checker writes
	// its report before the liveness (internal/health Checker.Publish),
	// so an instance read down here has its reason in the report.
	lives := make([]uint32, len(specs))
	for id := range specs {
		lives[id], _ = h.Live(id)
	}
	var rep healthReport
	_, _ = ReadHealth(netns, &rep) // none: no checker ran yet
	var out []agent.SIDCounters
	for id, sp := range specs {
		st, err := h.Stats(id, len(sp.Pool.Instances))
		if err != nil {
			return nil, err
		}
		d := map[string]uint64{"moved": st.Moved, "bypass": st.Bypass, "drop": st.Drop}
		for r, n := range st.Drops {
			d["drop-"+r] = n
		}
		var total uint64
		for i, n := range st.Instances {
			d["inst-"+sp.Pool.Instances[i].Name] = n
			total += n
		}
		route := sp.String()
		live := lives[id]
		var hl []string
		for i, in := range sp.Pool.Instances {
			d["up-"+in.Name] = uint64(live >> i & 1)
			line := in.Name + " " + map[bool]string{true: "up", false: "down"}[live>>i&1 == 1]
			for _, r := range rep.Instances {
				if r.Pool == sp.Pool.Name && r.Instance == in.Name {
					d["transitions-"+in.Name] = r.Transitions
					if r.Timeout > 0 { // numbered probes: the detector's view
						d["srtt-us-"+in.Name] = uint64(r.SRTT.Microseconds())
						d["timeout-us-"+in.Name] = uint64(r.Timeout.Microseconds())
						d["late-wakeups-"+in.Name] = r.LateWakeups
						d["late-answers-"+in.Name] = r.LateAnswers
					}
					if r.Last != nil {
						line += fmt.Sprintf(" since %s (%s)", r.Last.At.Format(time.RFC3339Nano), r.Last.Reason)
					}
				}
			}
			hl = append(hl, line)
		}
		if !rep.Updated.IsZero() {
			route += " | health " + strings.Join(hl, "; ") + " | checked " + rep.Updated.Format(time.RFC3339)
		} else {
			route += " | health " + strings.Join(hl, "; ") + " | no checker has run"
		}
		out = append(out, agent.SIDCounters{SID: netip.PrefixFrom(sp.Pool.Placeholder, 128), Behavior: "pool",
			Route: route, Owned: true, Counted: true,
			Packets: total + st.Bypass + st.Drop, Errors: st.Errors, Detail: d})
	}
	return out, nil
}

// AttachNew attaches the selector to interfaces created since.
func (NodeKind) AttachNew(netns string) error {
	specs, err := Specs(netns)
	if err != nil || len(specs) == 0 {
		return err
	}
	h, err := Open(netns)
	if err != nil {
		return err
	}
	return h.Close()
}

// Purge removes the selector and the records.
func (NodeKind) Purge(netns string) error {
	err := Remove(netns)
	for _, suf := range []string{".json", ".health.json"} {
		if f, e := stateFile(netns, suf); e == nil {
			_ = os.Remove(f)
		}
	}
	return err
}

// healthReport is what Counters reads of internal/health's Report.
type healthReport struct {
	Updated   time.Time `json:"updated"`
	Instances []struct {
		Pool        string        `json:"pool"`
		Instance    string        `json:"instance"`
		Transitions uint64        `json:"transitions"`
		SRTT        time.Duration `json:"srtt"`
		Timeout     time.Duration `json:"timeout"`
		LateWakeups uint64        `json:"late_wakeups"`
		LateAnswers uint64        `json:"late_answers"`
		Last        *struct {
			Reason string    `json:"reason"`
			At     time.Time `json:"at"`
		} `json:"last"`
	} `json:"instances"`
}

// WriteHealth records the health checker's report for netns.
func WriteHealth(netns string, v any) error {
	f, err := stateFile(netns, ".health.json")
	if err != nil {
		return err
	}
	return writeJSON(f, v)
}

// ReadHealth reads the report into v; false when there is none.
func ReadHealth(netns string, v any) (bool, error) {
	f, err := stateFile(netns, ".health.json")
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(f)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

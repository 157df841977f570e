package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/fwrule"
)

// StateRoot keeps each instance's rules as the user wrote them (bpffs
// holds only pins): StateRoot/ns-<inode>-<cookie>/<sid>.json.
const StateRoot = "/run/segchain/fw"

// Node is the firewall state of one network namespace: pinned maps, the
// loaded program and the rule files. All state lives in bpffs and /run,
// so it survives the process.
type Node struct {
	netns string
	dir   string // pin directory
	state string // rule files
	objs  fwTCObjects
	// noAttach: tests seed maps of an unpinned program they run with
	// BPF_PROG_TEST_RUN, nothing to attach.
	noAttach bool
}

// program is the firewall's pinned state in a namespace.
var program = bpfpin.Program{Name: "fw", What: "firewall", Flush: "segchain sid flush", Load: bpfpin.Parsed(loadFwTC)}

// open loads (or re-opens) the pinned maps of netns ("" = the calling
// thread's namespace).
func open(netns string) (*Node, error) {
	name, err := nsName(netns, true)
	if err != nil {
		return nil, err
	}
	// The firewall of a namespace lives in Root/ns-<inode>-<cookie>/fw,
	// next to the proxies' .../proxy.
	n, err := newNode(netns, name)
	if err != nil {
		return nil, err
	}
	spec, err := program.Spec()
	if err != nil {
		return nil, err
	}
	// Maps only: verifying the program takes seconds, and only attaching
	// needs it (attachAll loads it when an interface lacks it).
	if err := program.Assign(spec, &n.objs.fwTCMaps, n.dir); err != nil {
		return nil, err
	}
	return n, nil
}

// newNode is the firewall of the namespace called name, nothing loaded.
func newNode(netns, name string) (*Node, error) {
	dir, err := bpfpin.Dir(name, program.Name)
	if err != nil {
		return nil, err
	}
	return &Node{netns: netns, dir: dir, state: filepath.Join(StateRoot, name)}, nil
}

// Close releases the process' handles; pinned state stays.
func (n *Node) Close() error { return n.objs.Close() }

// nsName is bpfpin.Namespace's ns-<inode>-<cookie>. With clean, firewall
// state left by deleted namespaces is removed: by a dead namespace whose
// inode this one inherited, or whose links all lost their interface (the
// pins would otherwise keep ~13 MB of maps alive per namespace, e.g. after
// every perf run).
func nsName(netns string, clean bool) (string, error) {
	name, _, err := program.Dir(netns, clean, func(d string) {
		old := &Node{dir: d, state: filepath.Join(StateRoot, filepath.Base(filepath.Dir(d)))}
		_ = old.teardown()
	})
	return name, err
}

// installed reports whether netns has pinned firewall state (read-only
// verbs must not create any).
func installed(netns string) bool {
	root, err := bpfpin.Root()
	if err != nil {
		return false
	}
	name, err := nsName(netns, false)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(root, name, "fw", "fw_sids"))
	return err == nil
}

// attachAll attaches the program (TCX ingress, link pinned) to every
// interface but loopback that does not have it yet, loading it only then.
// The firewall returns TCX_NEXT for packets not addressed to it, so other
// TCX programs (the SR proxies) still see them.
func (n *Node) attachAll() error {
	if n.noAttach {
		return nil
	}
	return program.Attach(n.netns, n.dir, func() (*ebpf.Program, error) {
		if n.objs.FwTc == nil {
			spec, err := program.Spec()
			if err != nil {
				return nil, err
			}
			if err := program.Assign(spec, &n.objs.fwTCPrograms, n.dir); err != nil {
				return nil, err
			}
		}
		return n.objs.FwTc, nil
	}, ErrNotSupported)
}

// teardown removes links, pinned maps and rule files: nothing of the
// firewall is left in the namespace.
func (n *Node) teardown() error {
	if err := bpfpin.Remove(n.dir); err != nil {
		return err
	}
	_ = os.RemoveAll(n.state)
	_ = os.Remove(n.state + ".lock")
	return nil
}

func sidKey(p netip.Prefix) fwTCFwSidKey {
	return fwTCFwSidKey{Prefixlen: uint32(p.Bits()), Addr: p.Masked().Addr().As16()}
}

// instEntry is a firewall instance: its SID prefix and its fw_sids value.
type instEntry = bpfpin.SIDEntry[fwTCFwInst]

func (n *Node) instances() ([]instEntry, error) {
	return bpfpin.SIDEntries[fwTCFwInst](n.objs.FwSids, "firewall")
}

func tableID(id, slot uint32) uint32 { return id*2 + slot }

// alloc finds room for count entries in a pool of size max, outside every
// active table's range (the inactive slot being rewritten is free). rng
// reads a table's range.
func (n *Node) alloc(insts []instEntry, count int, max uint32, what string, rng func(*fwTCFwTable) (uint32, uint32)) (uint32, error) {
	var used []span
	for _, e := range insts {
		var t fwTCFwTable
		if err := n.objs.FwTables.Lookup(tableID(e.Val.Id, e.Val.Slot), &t); err != nil {
			return 0, fmt.Errorf("read table: %w", err)
		}
		if base, cnt := rng(&t); cnt > 0 {
			used = append(used, span{base, base + cnt})
		}
	}
	at, ok := firstFit(used, count, max)
	if !ok {
		return 0, poolFull(count, what, max, used)
	}
	return at, nil
}

func max32(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

// clearTable removes table tid's LPM entries and ARGS values.
func (n *Node) clearTable(tid uint32) error {
	var (
		k    fwTCFwLpmKey
		v    uint32
		keys []fwTCFwLpmKey
	)
	it := n.objs.FwLpm.Iterate()
	for it.Next(&k, &v) {
		if uint32(k.Table) == tid {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate lpm: %w", err)
	}
	for i := range keys {
		if err := n.objs.FwLpm.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete lpm entry: %w", err)
		}
	}
	var (
		ak    fwTCFwArgsKey
		av    uint32
		akeys []fwTCFwArgsKey
	)
	ait := n.objs.FwArgs.Iterate()
	for ait.Next(&ak, &av) {
		if ak.Table == tid {
			akeys = append(akeys, ak)
		}
	}
	for i := range akeys {
		_ = n.objs.FwArgs.Delete(&akeys[i])
	}
	return n.objs.FwTables.Put(tid, &fwTCFwTable{})
}

// writeTable writes compiled rule set c into table tid (not in use by any
// packet: the instance's inactive slot, or a new instance).
func (n *Node) writeTable(tid uint32, c *compiled, base, bbase uint32, carry []counter) error {
	if err := n.clearTable(tid); err != nil {
		return err
	}
	// Bitmaps.
	keys := make([]uint32, len(c.bitmaps))
	vals := make([]fwTCFwBitmap, len(c.bitmaps))
	for i, b := range c.bitmaps {
		keys[i] = base + uint32(i)
		vals[i] = fwTCFwBitmap{Summary: b.summary(), Words: b}
	}
	if err := n.putArray(n.objs.FwBitmaps, keys, vals); err != nil {
		return fmt.Errorf("write bitmaps: %w", err)
	}
	// Byte fields.
	var akeys, avals []uint32
	for f := first8; f < numFields; f++ {
		if c.used&(1<<f) == 0 {
			continue
		}
		for v := range 256 {
			akeys = append(akeys, (tid*uint32(num8)+uint32(f-first8))*256+uint32(v))
			avals = append(avals, base+c.arr8[f-first8][v])
		}
	}
	if err := n.putArray(n.objs.FwArr8, akeys, avals); err != nil {
		return fmt.Errorf("write byte fields: %w", err)
	}
	// 16-bit fields: first level, then the blocks.
	var k16, v16, kb, vb []uint32
	for f := first16; f < first8; f++ {
		if c.used&(1<<f) == 0 {
			continue
		}
		for hi, e := range c.arr16[f-first16] {
			k16 = append(k16, (tid*uint32(num16)+uint32(f-first16))*256+uint32(hi))
			if e&direct != 0 {
				v16 = append(v16, direct|(base+e&^direct))
			} else {
				v16 = append(v16, bbase+e)
			}
		}
	}
	for b, blk := range c.blocks {
		for lo, bm := range blk {
			kb = append(kb, (bbase+uint32(b))*256+uint32(lo))
			vb = append(vb, base+bm)
		}
	}
	if err := n.putArray(n.objs.FwBlocks, kb, vb); err != nil {
		return fmt.Errorf("write value blocks: %w", err)
	}
	if err := n.putArray(n.objs.FwArr16, k16, v16); err != nil {
		return fmt.Errorf("write 16-bit fields: %w", err)
	}
	// Addresses.
	for _, e := range c.lpm {
		k := fwTCFwLpmKey{Prefixlen: uint32(16 + e.bits), Table: uint8(tid), Field: uint8(e.field), Data: e.data}
		if err := n.objs.FwLpm.Put(&k, base+e.bm); err != nil {
			return fmt.Errorf("write lpm entry (%d entries): %w", len(c.lpm), err)
		}
	}
	// Rules and their counters.
	if c.nrules > 0 {
		rk := make([]uint32, c.nrules)
		rv := make([]fwTCFwRule, c.nrules)
		for i, r := range c.rules {
			rk[i] = tid*MaxRules + uint32(i)
			rv[i] = fwTCFwRule{Action: r.action, IcmpCode: r.code}
		}
		if err := n.putArray(n.objs.FwRules, rk, rv); err != nil {
			return fmt.Errorf("write rules: %w", err)
		}
		ncpu, err := ebpf.PossibleCPU()
		if err != nil {
			return err
		}
		for i := range c.rules {
			per := make([]fwTCFwCounter, ncpu)
			if i < len(carry) {
				per[0] = fwTCFwCounter{Packets: carry[i].packets, Bytes: carry[i].bytes}
			}
			if err := n.objs.FwRuleStats.Put(tid*MaxRules+uint32(i), per); err != nil {
				return fmt.Errorf("reset rule counters: %w", err)
			}
		}
	}
	for v, a := range c.args {
		if err := n.objs.FwArgs.Put(fwTCFwArgsKey{Table: tid, Value: v}, uint32(a)); err != nil {
			return fmt.Errorf("write ARGS table: %w", err)
		}
	}
	t := fwTCFwTable{Nrules: uint32(c.nrules), Used: c.used, Policy: c.policy, ArgsBits: c.argsBits,
		BmBase: base, BmCount: uint32(len(c.bitmaps)), BkBase: bbase, BkCount: uint32(len(c.blocks))}
	for i, m := range c.meta {
		t.Meta[i] = base + m
	}
	for f, a := range c.absent {
		t.Absent[f] = base + a
	}
	return n.objs.FwTables.Put(tid, &t)
}

// putArray writes an array map, in one batch where the kernel can.
func (n *Node) putArray(m *ebpf.Map, keys []uint32, vals any) error {
	if len(keys) == 0 {
		return nil
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err == nil {
		return nil
	}
	switch v := vals.(type) {
	case []uint32:
		for i, k := range keys {
			if err := m.Put(k, v[i]); err != nil {
				return err
			}
		}
	case []fwTCFwBitmap:
		for i, k := range keys {
			if err := m.Put(k, &v[i]); err != nil {
				return err
			}
		}
	case []fwTCFwRule:
		for i, k := range keys {
			if err := m.Put(k, v[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("putArray: %T", vals)
	}
	return nil
}

type counter struct{ packets, bytes uint64 }

func (n *Node) ruleCounters(tid uint32, nrules int) ([]counter, error) {
	out := make([]counter, nrules)
	for i := range out {
		var per []fwTCFwCounter
		if err := n.objs.FwRuleStats.Lookup(tid*MaxRules+uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read rule counters: %w", err)
		}
		for _, c := range per {
			out[i].packets += c.Packets
			out[i].bytes += c.Bytes
		}
	}
	return out, nil
}

// stored is an instance's rule file.
type stored struct {
	Instance
	Rules []fwrule.Rule `json:"rules"`
}

func (n *Node) stateFile(sid netip.Prefix) string {
	s := strings.NewReplacer(":", "-", "/", "_").Replace(sid.String())
	return filepath.Join(n.state, s+".json")
}

func (n *Node) save(in Instance) error {
	if err := os.MkdirAll(n.state, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(stored{Instance: in, Rules: in.Rules})
	if err != nil {
		return err
	}
	// A temporary name of this call's own: a fixed one is shared by every
	// writer of the SID and one could rename another's half-written file.
	f, err := os.CreateTemp(n.state, ".save-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), n.stateFile(in.SID))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (n *Node) load(sid netip.Prefix) (Instance, error) {
	b, err := os.ReadFile(n.stateFile(sid))
	if err != nil {
		return Instance{SID: sid}, err
	}
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return Instance{SID: sid}, fmt.Errorf("%s: %w", n.stateFile(sid), err)
	}
	in := s.Instance
	in.Rules = s.Rules
	return in, nil
}

func (n *Node) zeroStats(id uint32) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	if err := n.objs.FwStatsMap.Put(id, make([]fwTCFwStats, ncpu)); err != nil {
		return fmt.Errorf("reset counters of firewall %d: %w", id, err)
	}
	return nil
}

// apply installs or atomically replaces one instance.
func (n *Node) apply(in Instance, c *compiled) error {
	insts, err := n.instances()
	if err != nil {
		return err
	}
	var (
		cur    *instEntry
		usedID = map[uint32]bool{}
	)
	for i := range insts {
		usedID[insts[i].Val.Id] = true
		if insts[i].SID == in.SID {
			cur = &insts[i]
		}
	}
	var id, slot uint32
	var carry []counter
	if cur != nil {
		id, slot = cur.Val.Id, 1-cur.Val.Slot&1
		// Counters follow unchanged rules (same rule text, in order).
		old, err := n.load(in.SID)
		if err == nil {
			oc, err := n.ruleCounters(tableID(id, cur.Val.Slot&1), len(old.Rules))
			if err == nil {
				byText := map[string][]counter{}
				for i, r := range old.Rules {
					byText[r.String()] = append(byText[r.String()], oc[i])
				}
				carry = make([]counter, len(in.Rules))
				for i, r := range in.Rules {
					if l := byText[r.String()]; len(l) > 0 {
						carry[i], byText[r.String()] = l[0], l[1:]
					}
				}
			}
		}
	} else {
		if len(insts) >= MaxInstances {
			return fmt.Errorf("%s: at most %d firewall SIDs per node", in.SID, MaxInstances)
		}
		for usedID[id] {
			id++
		}
	}
	tid := tableID(id, slot)
	base, err := n.alloc(insts, len(c.bitmaps), maxBitmaps, "bitmaps", func(t *fwTCFwTable) (uint32, uint32) { return t.BmBase, t.BmCount })
	if err != nil {
		return fmt.Errorf("%s: %w", in.SID, err)
	}
	bbase, err := n.alloc(insts, len(c.blocks), maxBlocks, "value blocks", func(t *fwTCFwTable) (uint32, uint32) { return t.BkBase, t.BkCount })
	if err != nil {
		return fmt.Errorf("%s: %w", in.SID, err)
	}
	if err := n.writeTable(tid, c, base, bbase, carry); err != nil {
		return fmt.Errorf("%s: %w", in.SID, err)
	}
	if cur == nil {
		if err := n.zeroStats(id); err != nil {
			return err
		}
		rl := fwTCFwRatelimit{Tokens: 20}
		if err := n.objs.FwRatelimitMap.Put(id, &rl); err != nil {
			return fmt.Errorf("init rate limit: %w", err)
		}
	}
	if err := n.save(in); err != nil {
		return fmt.Errorf("%s: save rules: %w", in.SID, err)
	}
	// The flip: one map update makes the new rule set active.
	k := sidKey(in.SID)
	if err := n.objs.FwSids.Put(&k, &fwTCFwInst{Id: id, Slot: slot, CsidLblen: uint8(in.CSIDLBLen), CsidNflen: uint8(in.CSIDNFLen)}); err != nil {
		return fmt.Errorf("%s: activate: %w", in.SID, err)
	}
	return n.attachAll()
}

// remove deletes one instance; false: not installed here.
func (n *Node) remove(sid netip.Prefix) (bool, error) {
	insts, err := n.instances()
	if err != nil {
		return false, err
	}
	var me *instEntry
	for i := range insts {
		if insts[i].SID == sid {
			me = &insts[i]
		}
	}
	if me == nil {
		return false, nil
	}
	if len(insts) == 1 {
		return true, n.teardown()
	}
	k := sidKey(sid)
	if err := n.objs.FwSids.Delete(&k); err != nil {
		return true, fmt.Errorf("delete %s: %w", sid, err)
	}
	for slot := range uint32(2) {
		if err := n.clearTable(tableID(me.Val.Id, slot)); err != nil {
			return true, err
		}
	}
	_ = n.zeroStats(me.Val.Id)
	_ = os.Remove(n.stateFile(sid))
	return true, nil
}

func (n *Node) clearCounters(sid *netip.Prefix) error {
	insts, err := n.instances()
	if err != nil {
		return err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	for _, e := range insts {
		if sid != nil && e.SID != *sid {
			continue
		}
		if err := n.zeroStats(e.Val.Id); err != nil {
			return err
		}
		var t fwTCFwTable
		tid := tableID(e.Val.Id, e.Val.Slot&1)
		if err := n.objs.FwTables.Lookup(tid, &t); err != nil {
			return err
		}
		for i := range t.Nrules {
			if err := n.objs.FwRuleStats.Put(tid*MaxRules+i, make([]fwTCFwCounter, ncpu)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *Node) list() ([]Status, error) {
	insts, err := n.instances()
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, e := range insts {
		in, err := n.load(e.SID)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		st := Status{Instance: in, ID: e.Val.Id, Slot: e.Val.Slot & 1}
		var per []fwTCFwStats
		if err := n.objs.FwStatsMap.Lookup(e.Val.Id, &per); err != nil {
			return nil, fmt.Errorf("read counters of %s: %w", e.SID, err)
		}
		c := Counters{Drops: map[string]uint64{}}
		for _, p := range per {
			c.Packets += p.Packets
			c.Bytes += p.Bytes
			c.Forwarded += p.Forwarded
			c.Delivered += p.Delivered
			c.GoNext += p.GoNext
			c.SkipNext += p.SkipNext
			c.GoLast += p.GoLast
			c.Policy += p.Policy
			c.ICMPSent += p.IcmpSent
			c.ICMPLimited += p.IcmpLimited
			for r, v := range p.Drops {
				if v != 0 {
					c.Drops[DropReason(r).String()] += v
				}
			}
		}
		st.Counters = c
		var t fwTCFwTable
		if err := n.objs.FwTables.Lookup(tableID(e.Val.Id, st.Slot), &t); err != nil {
			return nil, err
		}
		rc, err := n.ruleCounters(tableID(e.Val.Id, st.Slot), int(t.Nrules))
		if err != nil {
			return nil, err
		}
		st.Rules = []RuleCounter{}
		for i, x := range rc {
			text := "?"
			if i < len(in.Rules) {
				text = in.Rules[i].String()
			}
			st.Rules = append(st.Rules, RuleCounter{Num: i + 1, Rule: text, Packets: x.packets, Bytes: x.bytes})
		}
		out = append(out, st)
	}
	return out, nil
}

func withNode(netns string, fn func(*Node) error) error {
	n, err := open(netns)
	if err != nil {
		return err
	}
	defer n.Close()
	// One writer at a time per namespace: two rule updates must not both
	// write the inactive slot.
	lf, err := bpfpin.LockFile(n.state+".lock", "firewall state")
	if err != nil {
		return err
	}
	defer lf.Close()
	return fn(n)
}

// state is the firewall of a namespace as the verbs below reach it.
var state = bpfpin.Locked[*Node]{Installed: installed, With: withNode}

// Apply installs the firewall instance in.SID in netns ("" = current), or
// replaces its rules, policy and ARGS table atomically: packets see the
// old rule set or the new one, never a mix. Counters of rules that are
// kept (same text) carry over.
func Apply(netns string, in Instance) error {
	in.SID = in.SID.Masked()
	c, err := compile(in)
	if err != nil {
		return err
	}
	return withNode(netns, func(n *Node) error { return n.apply(in, c) })
}

// Remove deletes the instance bound to sid; false means there was none.
// The last instance removed takes the program, links and maps with it.
func Remove(netns string, sid netip.Prefix) (bool, error) {
	return bpfpin.Read(state, netns, func(n *Node) (bool, error) { return n.remove(sid.Masked()) })
}

// List returns every instance of netns with its counters.
func List(netns string) ([]Status, error) { return bpfpin.Read(state, netns, (*Node).list) }

// Get returns the instance bound to sid (for read-modify-write verbs).
func Get(netns string, sid netip.Prefix) (Instance, bool, error) {
	sts, err := List(netns)
	if err != nil {
		return Instance{}, false, err
	}
	for _, s := range sts {
		if s.Instance.SID == sid.Masked() {
			return s.Instance, true, nil
		}
	}
	return Instance{}, false, nil
}

// ClearCounters zeroes the counters of one instance (nil: all).
func ClearCounters(netns string, sid *netip.Prefix) error {
	return state.Do(netns, func(n *Node) error { return n.clearCounters(sid) })
}

// Flush removes every instance of netns.
func Flush(netns string) error { return state.Do(netns, (*Node).teardown) }

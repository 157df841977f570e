package firewall

import (
	"fmt"
	"math/bits"
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/fwrule"
)

// Derived limits of the data path; the others (MaxRules, MaxInstances,
// maxBitmaps, maxBlocks, direct, maxArgs) are generated from the
// #defines of bpf/fw_tc.bpf.c into fwtc_bpfconst.go.
const (
	maxTables = 2 * MaxInstances
	words     = MaxRules / 64
	numFields = int(fwTCFwFieldFW_F_MAX)
	first16   = int(fwTCFwFieldFW_F_SPORT)
	first8    = int(fwTCFwFieldFW_F_PROTO)
	num8      = numFields - first8
	num16     = first8 - first16
)

// Field names, for `fw list` and docs.
var fieldNames = [numFields]string{
	"src", "dst", "outer-src", "outer-dst", "psid", "nsid", "lsid",
	"sport", "dport", "icmp", "tag",
	"proto", "srh-next-hdr", "srh-hdr-len", "srh-segs-left", "srh-last-entry",
}

// bitmap is the set of rules a field value admits: bit i = rule i.
type bitmap [words]uint64

func (b *bitmap) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b *bitmap) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// summary has bit w set when word w is not zero.
func (b *bitmap) summary() uint64 {
	var s uint64
	for w, x := range b {
		if x != 0 {
			s |= 1 << w
		}
	}
	return s
}

// lpmEntry is one key of fw_lpm: address field f, prefix of bits bits.
type lpmEntry struct {
	field int
	bits  int
	data  [16]byte
	bm    uint32 // local bitmap index
}

type ruleAct struct {
	action uint8
	code   uint8
}

// compiled is one instance's rule set as lookup tables. Bitmap indexes are
// local (0..len(bitmaps)-1); the node adds the table's base in the pool.
type compiled struct {
	nrules   int
	used     uint32
	bitmaps  []bitmap
	meta     [4]uint32
	absent   [numFields]uint32
	arr8     [num8][256]uint32
	arr16    [num16][256]uint32 // direct|bitmap, or a local block index
	blocks   [][256]uint32      // bitmap per low byte
	lpm      []lpmEntry
	rules    []ruleAct
	policy   uint8
	argsBits uint8
	args     map[uint32]uint8
}

// action codes (enum fw_action).
const (
	actGoNext   = uint8(fwTCFwActionFW_ACT_GO_NEXT)
	actDrop     = uint8(fwTCFwActionFW_ACT_DROP)
	actSkipNext = uint8(fwTCFwActionFW_ACT_SKIP_NEXT)
	actGoLast   = uint8(fwTCFwActionFW_ACT_GO_LAST)
	actEvalArgs = uint8(fwTCFwActionFW_ACT_EVAL_ARGS)
	actReject   = uint8(fwTCFwActionFW_ACT_REJECT)
)

func actionOf(k fwrule.TargetKind) (uint8, error) {
	switch k {
	case fwrule.Accept, fwrule.GoNext:
		return actGoNext, nil
	case fwrule.Drop:
		return actDrop, nil
	case fwrule.Reject:
		return actReject, nil
	case fwrule.SkipNext:
		return actSkipNext, nil
	case fwrule.GoLast:
		return actGoLast, nil
	case fwrule.EvalArgs:
		return actEvalArgs, nil
	}
	return 0, fmt.Errorf("unknown action %v", k)
}

// rejectCode is the ICMPv6 Destination Unreachable code a REJECT sends.
// The error goes to the SRv6 packet's source (an IPv6 node, the headend),
// so the ICMP (IPv4) values of iptables rules map to their ICMPv6
// equivalents (RFC 4443 3.1).
func rejectCode(with string, fam fwrule.Family) (uint8, error) {
	if with == "" {
		with = fwrule.DefaultRejectWith(fam)
	}
	typ, code, ok := fwrule.RejectICMP(with)
	if !ok {
		return 0, fmt.Errorf("--reject-with %s: not supported by the data path (it answers with ICMPv6 errors only)", with)
	}
	if typ == 1 {
		return code, nil
	}
	switch code { // ICMPv4 Destination Unreachable codes
	case 0: // net unreachable
		return 0, nil // no route to destination
	case 1: // host unreachable
		return 3, nil // address unreachable
	case 2, 3: // protocol, port unreachable
		return 4, nil // port unreachable
	default: // net/host/admin prohibited
		return 1, nil // administratively prohibited
	}
}

// Validate checks an instance without compiling it.
func (in Instance) Validate() error {
	_, err := compile(in)
	return err
}

func compile(in Instance) (*compiled, error) {
	if !in.SID.IsValid() || !in.SID.Addr().Is6() || in.SID.Addr().Is4In6() {
		return nil, fmt.Errorf("SID %s: want an IPv6 prefix", in.SID)
	}
	if in.ArgsBits < 0 || in.ArgsBits > 32 || in.ArgsBits > 128-in.SID.Bits() {
		return nil, fmt.Errorf("%s: args %d: want 0..32 bits, within the SID's %d host bits", in.SID, in.ArgsBits, 128-in.SID.Bits())
	}
	if len(in.Rules) > MaxRules {
		return nil, fmt.Errorf("%s: %d rules: the data path holds at most %d per instance", in.SID, len(in.Rules), MaxRules)
	}
	c := &compiled{nrules: len(in.Rules), argsBits: uint8(in.ArgsBits), args: map[uint32]uint8{}}
	switch in.Policy {
	case fwrule.Accept, fwrule.GoNext:
		c.policy = actGoNext
	case fwrule.Drop:
		c.policy = actDrop
	default:
		return nil, fmt.Errorf("%s: policy %s: want accept or drop", in.SID, in.Policy)
	}
	args, dflt := in.Args, in.Args == nil
	if dflt {
		args = fwrule.DefaultArgs()
	}
	for v, k := range args {
		if in.ArgsBits < 32 && uint64(v) >= 1<<in.ArgsBits {
			if dflt || in.CSIDNFLen > 0 {
				continue // the default table's values that fit (a uSID has no ARGS)
			}
			return nil, fmt.Errorf("%s: ARGS value %d does not fit in %d bits", in.SID, v, in.ArgsBits)
		}
		if k == fwrule.EvalArgs {
			return nil, fmt.Errorf("%s: ARGS value %d: eval-args cannot be the action of an ARGS value", in.SID, v)
		}
		a, err := actionOf(k)
		if err != nil {
			return nil, fmt.Errorf("%s: ARGS value %d: %w", in.SID, v, err)
		}
		c.args[v] = a
	}
	if len(c.args) > maxArgs {
		return nil, fmt.Errorf("%s: %d ARGS values: at most %d", in.SID, len(c.args), maxArgs)
	}
	for i, r := range in.Rules {
		a, err := actionOf(r.Target.Kind)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		ra := ruleAct{action: a}
		if a == actReject {
			if ra.code, err = rejectCode(r.Target.RejectWith, r.Family); err != nil {
				return nil, fmt.Errorf("rule %d: %w", i+1, err)
			}
		}
		c.rules = append(c.rules, ra)
		for f := range numFields {
			if usesField(r, f) {
				c.used |= 1 << f
			}
		}
	}

	dedup := map[bitmap]uint32{}
	intern := func(b bitmap) uint32 {
		if i, ok := dedup[b]; ok {
			return i
		}
		i := uint32(len(c.bitmaps))
		c.bitmaps = append(c.bitmaps, b)
		dedup[b] = i
		return i
	}
	n := len(in.Rules)
	all := func(admit func(r fwrule.Rule) bool) bitmap {
		var b bitmap
		for i, r := range in.Rules {
			if admit(r) {
				b.set(i)
			}
		}
		return b
	}
	ones := intern(all(func(fwrule.Rule) bool { return true }))
	for m := range 4 {
		v4, srh := m&1 != 0, m&2 != 0
		c.meta[m] = intern(all(func(r fwrule.Rule) bool { return metaOK(r, v4, srh) }))
	}
	for f := range numFields {
		if c.used&(1<<f) == 0 {
			c.absent[f] = ones
			continue
		}
		c.absent[f] = intern(all(func(r fwrule.Rule) bool { return absentOK(r, f) }))
		switch {
		case f < first16:
			c.compileAddr(in.Rules, f, intern)
		case f < first8:
			c.compile16(in.Rules, f, intern)
		default:
			for v := range 256 {
				c.arr8[f-first8][v] = intern(all(func(r fwrule.Rule) bool { return match8(r, f, uint8(v)) }))
			}
		}
	}
	_ = n
	if len(c.blocks) > maxBlocks {
		return nil, fmt.Errorf("%s: the port/ICMP/tag matches need %d blocks of 256 values, at most %d", in.SID, len(c.blocks), maxBlocks)
	}
	return c, nil
}

// usesField reports whether rule r matches on field f.
func usesField(r fwrule.Rule, f int) bool {
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_SRC:
		return addrOf(r, f) != nil
	case fwTCFwFieldFW_F_DST, fwTCFwFieldFW_F_OSRC, fwTCFwFieldFW_F_ODST,
		fwTCFwFieldFW_F_PSID, fwTCFwFieldFW_F_NSID, fwTCFwFieldFW_F_LSID:
		return addrOf(r, f) != nil
	case fwTCFwFieldFW_F_SPORT:
		return r.SPort != nil
	case fwTCFwFieldFW_F_DPORT:
		return r.DPort != nil
	case fwTCFwFieldFW_F_ICMP:
		return r.ICMP != nil
	case fwTCFwFieldFW_F_TAG:
		return r.SRH && r.Tag != nil
	case fwTCFwFieldFW_F_PROTO:
		return r.Proto != nil
	case fwTCFwFieldFW_F_NEXTHDR:
		return r.SRH && r.NextHdr != nil
	case fwTCFwFieldFW_F_HDRLEN:
		return r.SRH && r.HdrLen != nil
	case fwTCFwFieldFW_F_SEGS:
		return r.SRH && r.SegsLeft != nil
	case fwTCFwFieldFW_F_LAST:
		return r.SRH && r.LastEntry != nil
	}
	return false
}

// addrOf is the prefix rule r matches on address field f (nil: wildcard).
func addrOf(r fwrule.Rule, f int) *fwrule.Prefix {
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_SRC:
		if r.SRH {
			return r.InnerSrc
		}
		return r.Src
	case fwTCFwFieldFW_F_DST:
		if r.SRH {
			return r.InnerDst
		}
		return r.Dst
	case fwTCFwFieldFW_F_OSRC:
		if r.SRH {
			return r.Src
		}
	case fwTCFwFieldFW_F_ODST:
		if r.SRH {
			return r.Dst
		}
	case fwTCFwFieldFW_F_PSID:
		if r.SRH {
			return r.PSID
		}
	case fwTCFwFieldFW_F_NSID:
		if r.SRH {
			return r.NSID
		}
	case fwTCFwFieldFW_F_LSID:
		if r.SRH {
			return r.LSID
		}
	}
	return nil
}

// metaOK: the conditions of fwrule.Matches that are not per field — the
// family of the original packet and the presence of an SRH.
func metaOK(r fwrule.Rule, v4, srh bool) bool {
	fam := fwrule.IPv6
	if v4 {
		fam = fwrule.IPv4
	}
	if r.SRH {
		if !srh {
			return false
		}
		// --inner-src/--inner-dst only match an original of their family.
		for _, p := range []*fwrule.Prefix{r.InnerSrc, r.InnerDst} {
			if p != nil && p.Prefix.Addr().Is4() != v4 {
				return false
			}
		}
	} else if r.Family != fam {
		return false
	}
	if r.ICMP != nil && r.Family != fam {
		return false
	}
	return true
}

// absentOK: does r match when the packet lacks field f (no ports, no ICMP
// header, no SRH, no previous/next SID)? Only if r does not look at it.
func absentOK(r fwrule.Rule, f int) bool {
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_SPORT, fwTCFwFieldFW_F_DPORT:
		return r.SPort == nil && r.DPort == nil
	}
	return !usesField(r, f)
}

// mapped is p as a 128-bit prefix (IPv4 as v4-mapped IPv6).
func mapped(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if p.Addr().Is4() {
		return netip.PrefixFrom(netip.AddrFrom16(p.Addr().As16()), p.Bits()+96)
	}
	return p
}

// compileAddr: one LPM entry per distinct prefix of field f (plus ::/0).
// An address whose longest match is P is inside rule prefix Q exactly when
// Q contains P (Q is in the trie too), so bitmap(P) = rules whose prefix
// contains P, negations complemented.
func (c *compiled) compileAddr(rules []fwrule.Rule, f int, intern func(bitmap) uint32) {
	nodes := map[netip.Prefix]bool{netip.PrefixFrom(netip.IPv6Unspecified(), 0): true}
	for _, r := range rules {
		if p := addrOf(r, f); p != nil {
			nodes[mapped(p.Prefix)] = true
		}
	}
	keys := make([]netip.Prefix, 0, len(nodes))
	for p := range nodes {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Bits() != keys[j].Bits() {
			return keys[i].Bits() < keys[j].Bits()
		}
		return keys[i].Addr().Less(keys[j].Addr())
	})
	for _, p := range keys {
		var b bitmap
		for i, r := range rules {
			q := addrOf(r, f)
			if q == nil {
				b.set(i)
				continue
			}
			m := mapped(q.Prefix)
			in := m.Bits() <= p.Bits() && m.Contains(p.Addr())
			if in != q.Neg {
				b.set(i)
			}
		}
		c.lpm = append(c.lpm, lpmEntry{field: f, bits: p.Bits(), data: p.Addr().As16(), bm: intern(b)})
	}
}

// span16 is the set of 16-bit values rule r admits on field f, as the
// inclusive interval and whether it is complemented.
func span16(r fwrule.Rule, f int) (lo, hi uint16, neg, ok bool) {
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_SPORT:
		if r.SPort != nil {
			return r.SPort.Lo, r.SPort.Hi, r.SPort.Neg, true
		}
	case fwTCFwFieldFW_F_DPORT:
		if r.DPort != nil {
			return r.DPort.Lo, r.DPort.Hi, r.DPort.Neg, true
		}
	case fwTCFwFieldFW_F_ICMP:
		if r.ICMP != nil {
			lo, hi := r.ICMP.Range()
			return lo, hi, r.ICMP.Neg, true
		}
	case fwTCFwFieldFW_F_TAG:
		if r.SRH && r.Tag != nil {
			return r.Tag.Value, r.Tag.Value, r.Tag.Neg, true
		}
	}
	return 0, 0, false, false
}

// compile16 cuts the 16-bit space at every rule's interval bounds, merges
// neighbouring intervals that admit the same rules, and stores the result
// as two-level arrays (high byte, then a 256-value block for the low byte
// where the high byte's values do not all admit the same rules).
func (c *compiled) compile16(rules []fwrule.Rule, f int, intern func(bitmap) uint32) {
	cuts := map[uint32]bool{0: true}
	for _, r := range rules {
		if lo, hi, _, ok := span16(r, f); ok {
			cuts[uint32(lo)] = true
			cuts[uint32(hi)+1] = true
		}
	}
	starts := make([]uint32, 0, len(cuts))
	for v := range cuts {
		if v <= 0xffff {
			starts = append(starts, v)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	type ival struct {
		lo, hi uint32
		b      bitmap
	}
	var ivs []ival
	for k, lo := range starts {
		hi := uint32(0xffff)
		if k+1 < len(starts) {
			hi = starts[k+1] - 1
		}
		var b bitmap
		for i, r := range rules {
			l, h, neg, ok := span16(r, f)
			if !ok || (lo >= uint32(l) && lo <= uint32(h)) != neg {
				b.set(i)
			}
		}
		if len(ivs) > 0 && ivs[len(ivs)-1].b == b {
			ivs[len(ivs)-1].hi = hi
			continue
		}
		ivs = append(ivs, ival{lo, hi, b})
	}
	// Value -> bitmap, then blocks of 256 values: uniform ones are
	// stored directly, the others as blocks (deduplicated).
	var val [65536]uint32
	for _, iv := range ivs {
		bm := intern(iv.b)
		for v := iv.lo; v <= iv.hi; v++ {
			val[v] = bm
		}
	}
	blockIdx := map[[256]uint32]uint32{}
	for hi := range 256 {
		var blk [256]uint32
		copy(blk[:], val[hi*256:hi*256+256])
		uniform := true
		for _, x := range blk {
			uniform = uniform && x == blk[0]
		}
		if uniform {
			c.arr16[f-first16][hi] = direct | blk[0]
			continue
		}
		i, ok := blockIdx[blk]
		if !ok {
			i = uint32(len(c.blocks))
			c.blocks = append(c.blocks, blk)
			blockIdx[blk] = i
		}
		c.arr16[f-first16][hi] = i
	}
}

// match8 evaluates rule r's byte field f on value v.
func match8(r fwrule.Rule, f int, v uint8) bool {
	cmp := func(m *fwrule.Compare8) bool {
		if m == nil {
			return true
		}
		var ok bool
		switch m.Op {
		case fwrule.Eq:
			ok = v == m.Value
		case fwrule.Gt:
			ok = v > m.Value
		case fwrule.Lt:
			ok = v < m.Value
		}
		return ok != m.Neg
	}
	val := func(m *fwrule.Value8) bool { return m == nil || (m.Value == v) != m.Neg }
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_PROTO:
		return val(r.Proto)
	case fwTCFwFieldFW_F_NEXTHDR:
		return !r.SRH || val(r.NextHdr)
	case fwTCFwFieldFW_F_HDRLEN:
		return !r.SRH || cmp(r.HdrLen)
	case fwTCFwFieldFW_F_SEGS:
		return !r.SRH || cmp(r.SegsLeft)
	case fwTCFwFieldFW_F_LAST:
		return !r.SRH || cmp(r.LastEntry)
	}
	return true
}

// classify is the data path's lookup in Go over the compiled tables (for
// tests and `fw list` explanations): the first rule all fields admit.
func (c *compiled) classify(p fwrule.Packet) (int, bool) {
	m := 0
	if p.Family == fwrule.IPv4 {
		m |= 1
	}
	if p.HasSRH {
		m |= 2
	}
	acc := c.bitmaps[c.meta[m]]
	for f := range numFields {
		idx := c.fieldIndex(f, p)
		b := c.bitmaps[idx]
		for w := range acc {
			acc[w] &= b[w]
		}
	}
	for w, x := range acc {
		if x != 0 {
			i := w*64 + bits.TrailingZeros64(x)
			if i < c.nrules {
				return i, true
			}
		}
	}
	return -1, false
}

func (c *compiled) fieldIndex(f int, p fwrule.Packet) uint32 {
	if c.used&(1<<f) == 0 {
		return c.absent[f]
	}
	var a netip.Addr
	var v16 uint16
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_SRC:
		a = p.OrigSrc
	case fwTCFwFieldFW_F_DST:
		a = p.OrigDst
	case fwTCFwFieldFW_F_OSRC, fwTCFwFieldFW_F_ODST, fwTCFwFieldFW_F_LSID, fwTCFwFieldFW_F_TAG,
		fwTCFwFieldFW_F_NEXTHDR, fwTCFwFieldFW_F_HDRLEN, fwTCFwFieldFW_F_SEGS, fwTCFwFieldFW_F_LAST:
		if !p.HasSRH {
			return c.absent[f]
		}
	}
	switch fwTCFwField(f) {
	case fwTCFwFieldFW_F_OSRC:
		a = p.OuterSrc
	case fwTCFwFieldFW_F_ODST:
		a = p.OuterDst
	case fwTCFwFieldFW_F_LSID:
		a = p.LSID
	case fwTCFwFieldFW_F_PSID, fwTCFwFieldFW_F_NSID:
		a = p.PSID
		if f == int(fwTCFwFieldFW_F_NSID) {
			a = p.NSID
		}
		if !a.IsValid() {
			return c.absent[f]
		}
	case fwTCFwFieldFW_F_SPORT, fwTCFwFieldFW_F_DPORT:
		if !p.HasPorts {
			return c.absent[f]
		}
		v16 = p.SPort
		if f == int(fwTCFwFieldFW_F_DPORT) {
			v16 = p.DPort
		}
	case fwTCFwFieldFW_F_ICMP:
		if !p.HasICMP {
			return c.absent[f]
		}
		v16 = uint16(p.ICMPType)<<8 | uint16(p.ICMPCode)
	case fwTCFwFieldFW_F_TAG:
		v16 = p.Tag
	case fwTCFwFieldFW_F_PROTO:
		return c.arr8[f-first8][p.Proto]
	case fwTCFwFieldFW_F_NEXTHDR:
		return c.arr8[f-first8][p.NextHdr]
	case fwTCFwFieldFW_F_HDRLEN:
		return c.arr8[f-first8][p.HdrLen]
	case fwTCFwFieldFW_F_SEGS:
		return c.arr8[f-first8][p.SegsLeft]
	case fwTCFwFieldFW_F_LAST:
		return c.arr8[f-first8][p.LastEntry]
	}
	if f >= first16 {
		e := c.arr16[f-first16][v16>>8]
		if e&direct != 0 {
			return e &^ direct
		}
		return c.blocks[e][v16&0xff]
	}
	key := a.As16()
	best, bestBits := uint32(0), -1
	for _, e := range c.lpm {
		if e.field != f || e.bits <= bestBits || !prefixMatch(e.data, key, e.bits) {
			continue
		}
		best, bestBits = e.bm, e.bits
	}
	return best
}

func prefixMatch(p, k [16]byte, n int) bool {
	for i := 0; i < n; i++ {
		if (p[i/8]>>(7-i%8))&1 != (k[i/8]>>(7-i%8))&1 {
			return false
		}
	}
	return true
}

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/csid"
	"github.com/segchain/segchain/internal/sid"
)

// SID formats (sid.format).
const (
	SIDFormatFull  = "full"
	SIDFormatF3216 = "f3216" // a /32 block, 16-bit uSIDs (RFC 9800's F3216)
	SIDFormatF4816 = "f4816" // a /48 block, 16-bit uSIDs
	SIDFormatCSID  = "csid"  // a block of any LBL (multiple of 8, 8..96), 16-bit uSIDs
)

// SIDFormats are the values of sid.format.
var SIDFormats = []string{SIDFormatFull, SIDFormatF3216, SIDFormatF4816, SIDFormatCSID}

// DefaultUSIDBlock is the f3216 locator block when sid.block is absent
// (the block RFC 9800's and FRR's examples use). f4816 and csid have no
// default: the block is the operator's allocation.
const DefaultUSIDBlock = "fcbb:bb00::/32"

// USIDBits is the length of a uSID (sid.usid_bits, the kernel's nflen),
// the only one offered: a node's uN is ID<<8 and its functions ID01..IDff
// (an 8-bit node id, an 8-bit function). 8 would leave no room for
// functions beside a node id; 24 or 32 would need another allocation of
// node and function bits and a wider printing in every tool.
const USIDBits = 16

// MaxUSIDNodeID is the largest node id a compressed domain's SR nodes may
// have: a node's uN is the uSID ID<<8 (its /(LBL+8) holds its 255
// function uSIDs).
const MaxUSIDNodeID = 0xff

// MaxUSIDBlockBits is the longest block a compressed format takes: a /96
// leaves two uSIDs a container; a longer one would hold one (no
// compression, a route more per hop).
const MaxUSIDBlockBits = 128 - 2*USIDBits

// formatBlockBits is the block length of the formats that fix it.
var formatBlockBits = map[string]int{SIDFormatF3216: 32, SIDFormatF4816: 48}

// Compressed reports whether the domain compresses SIDs (sid.format
// f3216, f4816 or csid).
func (d *Domain) Compressed() bool {
	switch d.SID.Format {
	case SIDFormatF3216, SIDFormatF4816, SIDFormatCSID:
		return true
	}
	return false
}

// USIDFormat is the domain's C-SID format: its block (LBL = the block's
// length) and 16-bit uSIDs.
func (d *Domain) USIDFormat() csid.Format {
	b := d.SID.Block
	if b == "" && d.SID.Format == SIDFormatF3216 {
		b = DefaultUSIDBlock
	}
	p, _ := netip.ParsePrefix(b)
	return csid.Format{Block: p.Masked(), NFLen: USIDBits}
}

// USIDLocator is the /(LBL+8) of node n's uSIDs: block:ID00:: (its uN is
// ID00, its functions ID01..IDff). Invalid when n has no uN (not an SR
// node with a locator, or the domain is not compressed).
func (d *Domain) USIDLocator(n string) netip.Prefix {
	node := d.Nodes[n]
	if !d.Compressed() || node == nil || node.Locator == "" || node.ID < 1 || node.ID > MaxUSIDNodeID {
		return netip.Prefix{}
	}
	f := d.USIDFormat()
	return netip.PrefixFrom(f.SID(uint32(node.ID)<<8), f.Block.Bits()+8)
}

// USIDNode is node n's uN uSID value (ID<<8).
func (d *Domain) USIDNode(n string) uint32 { return uint32(d.Nodes[n].ID) << 8 }

// shifting are the behaviours the kernel's next-csid flavor serves (End,
// End.X): a uSID of theirs may sit anywhere in a container.
var shifting = map[string]bool{"End": true, "End.X": true}

// csidKind is a service kind whose data path understands uSID containers
// (it shifts them on End); CSIDRefusal says why one service of it cannot
// take a uSID ("" when it can).
type csidKind interface {
	CSIDRefusal(block any, dir string) string
}

// USIDReason says why SID-table entry key (a service name, EgressKey or
// ReturnKey) keeps a full SID in a compressed domain; "" means it gets a
// uSID. The reasons are what plan prints for a mixed chain.
func (d *Domain) USIDReason(key string) string {
	if !d.Compressed() {
		return "sid.format is full"
	}
	if s, ok := d.Services[key]; ok && s != nil {
		switch {
		case s.SID != "" || s.Function != "":
			return "its SID or FUNCT is pinned"
		case s.Served():
			if k, ok := s.ServiceKind().(csidKind); ok {
				if r := k.CSIDRefusal(s.KindBlock(), d.Dir); r != "" {
					return "kind " + s.Kind + ": " + r
				}
				return ""
			}
			return "kind " + s.Kind + ": its data path matches a full SID (containers are not parsed there yet)"
		case !shifting[s.Behavior]:
			return s.Behavior + ": the kernel's next-csid flavor exists for End and End.X only"
		}
		for _, f := range s.Flavors {
			if f != "next-csid" {
				return "flavor " + f + " does not combine with next-csid here"
			}
		}
		return ""
	}
	for name, c := range d.Chains {
		if c == nil {
			continue
		}
		var e *Egress
		switch key {
		case EgressKey(name):
			e = c.Egress
		case ReturnKey(name):
			if c.Return != nil && c.Return.SID != "" {
				return "its SID is pinned"
			}
			return ""
		default:
			continue
		}
		if e == nil {
			return "no egress"
		}
		if e.SID != "" {
			return "its SID is pinned"
		}
		return "" // a decapsulating behaviour, the last uSID of the chain
	}
	return "unknown SID"
}

// USIDs allocates a uSID to every compressible entry of the SID table (see
// USIDReason): per node, sid.Allocate's stable hashing over the 8 bits
// after the node's uN (values ID01..IDff), returned as the uSID's own
// address block:uSID::.
func (d *Domain) USIDs() (map[string]netip.Addr, error) {
	out := map[string]netip.Addr{}
	if !d.Compressed() {
		return out, nil
	}
	reqs, paths, errs := d.sidRequests()
	f := sid.Format{LocatorBits: d.USIDFormat().Block.Bits() + 8, FunctionBits: 8}
	for _, node := range sortedKeys(reqs) {
		loc := d.USIDLocator(node)
		var rs []sid.Request
		for _, r := range reqs[node] {
			if d.USIDReason(r.Name) == "" {
				rs = append(rs, sid.Request{Name: r.Name})
			}
		}
		if len(rs) == 0 {
			continue
		}
		if !loc.IsValid() {
			for _, r := range rs {
				errs = append(errs, fmt.Errorf("%s: node %q has no uN locator", paths[r.Name], node))
			}
			continue
		}
		m, err := sid.Allocate(node, loc, f, rs)
		if err != nil {
			errs = append(errs, fmt.Errorf("uSIDs: %w", err))
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, errors.Join(errs...)
}

// usid checks sid.format, sid.block, sid.usid_bits and what a compressed
// domain needs.
func (v *validator) usid() {
	s := v.d.SID
	if s.Format != "" && !contains(SIDFormats, s.Format) {
		v.errf("sid.format", "unknown format %q (one of %s)", s.Format, strings.Join(SIDFormats, ", "))
		return
	}
	if !v.d.Compressed() {
		if s.Block != "" {
			v.errf("sid.block", "a locator block is for a compressed sid.format (%s, %s, %s)", SIDFormatF3216, SIDFormatF4816, SIDFormatCSID)
		}
		if s.USIDBits != 0 {
			v.errf("sid.usid_bits", "a uSID length is for a compressed sid.format (%s, %s, %s)", SIDFormatF3216, SIDFormatF4816, SIDFormatCSID)
		}
		return
	}
	if s.USIDBits != 0 && s.USIDBits != USIDBits {
		v.errf("sid.usid_bits", "%d: only %d-bit uSIDs are offered (a uSID is an 8-bit node id and an 8-bit function: plan allocates no other split, and segchain's tools print 16-bit uSIDs)", s.USIDBits, USIDBits)
		return
	}
	want := formatBlockBits[s.Format]
	if s.Block == "" {
		if s.Format != SIDFormatF3216 {
			v.errf("sid.block", "sid.format %s needs a block (your allocation, e.g. \"2001:db8:aa::/48\"): it has no default", s.Format)
			return
		}
	} else {
		p, err := netip.ParsePrefix(s.Block)
		switch {
		case err != nil:
			v.errf("sid.block", "%v", err)
			return
		case !p.Addr().Is6() || p.Addr().Is4In6():
			v.errf("sid.block", "%s: want an IPv6 prefix", s.Block)
			return
		case want != 0 && p.Bits() != want:
			v.errf("sid.block", "%s: %s wants a /%d block (sid.format csid takes other lengths)", s.Block, s.Format, want)
			return
		case p.Bits()%8 != 0 || p.Bits() == 0:
			v.errf("sid.block", "%s: the block length (the kernel's lblen) must be a positive multiple of 8", s.Block)
			return
		case p.Bits() > MaxUSIDBlockBits:
			v.errf("sid.block", "%s: a /%d block leaves %d bits, %d uSID(s) of %d bits a container: at most /%d (two uSIDs a container)", s.Block, p.Bits(), 128-p.Bits(), (128-p.Bits())/USIDBits, USIDBits, MaxUSIDBlockBits)
			return
		case p.Masked() != p:
			v.errf("sid.block", "%s has host bits set", s.Block)
			return
		}
	}
	f := v.d.USIDFormat()
	if err := f.Validate(); err != nil {
		v.errf("sid.block", "%v", err)
		return
	}
	for _, name := range v.d.NodeNames() {
		n := v.d.Nodes[name]
		if n == nil || n.Locator == "" {
			continue
		}
		if n.ID > MaxUSIDNodeID {
			v.errf("nodes."+name+".id", "id %d: sid.format %s gives node ID the uN uSID ID<<8, so SR node ids are 1..%d", n.ID, s.Format, MaxUSIDNodeID)
		}
		if loc, err := netip.ParsePrefix(n.Locator); err == nil && loc.Overlaps(f.Block) {
			v.errf("nodes."+name+".locator", "%s overlaps the uSID block %s", loc, f.Block)
		}
	}
	for i, l := range v.d.Links {
		if l == nil {
			continue
		}
		if p, err := netip.ParsePrefix(l.IPv6); err == nil && p.Overlaps(f.Block) {
			v.errf(fmt.Sprintf("links[%d].ipv6", i), "%s overlaps the uSID block %s", p, f.Block)
		}
	}
	if v.d.Routing.Mode == RoutingBGP {
		v.errf("routing.mode", "bgp: sid.format %s needs routing: static (the BGP speakers do not advertise uN locators yet)", s.Format)
	}
}

package usid

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/testutil"
)

// usidFormat is a SID format the tests apply a domain in: its sid: line
// and, compressed, its block (LBL = the block's length, 16-bit uSIDs).
type usidFormat struct {
	name, sid string
	block     netip.Prefix
}

var usidFormats = map[string]usidFormat{
	config.SIDFormatFull:  {config.SIDFormatFull, "{format: full}", netip.MustParsePrefix(config.DefaultUSIDBlock)},
	config.SIDFormatF3216: {config.SIDFormatF3216, "{format: f3216}", netip.MustParsePrefix(config.DefaultUSIDBlock)},
	// An operator's /48 (issue 31: F4816, five uSIDs a container).
	config.SIDFormatF4816: {config.SIDFormatF4816, `{format: f4816, block: "2001:db8:aa::/48"}`, netip.MustParsePrefix("2001:db8:aa::/48")},
}

func formatOf(t testing.TB, name string) usidFormat {
	f, ok := usidFormats[name]
	if !ok {
		t.Fatalf("no test format %q", name)
	}
	return f
}

// lbl is the block's length in bits.
func (f usidFormat) lbl() int { return f.block.Bits() }

// container writes 16-bit uSIDs after the block, in order (0 for an
// end-of-container zero), the rest zero.
func (f usidFormat) container(usids ...uint16) netip.Addr {
	b := f.block.Addr().As16()
	for i, v := range usids {
		o := f.lbl()/8 + 2*i
		b[o], b[o+1] = byte(v>>8), byte(v)
	}
	return netip.AddrFrom16(b)
}

// usid is the 16-bit uSID of a SID written block:uSID::.
func (f usidFormat) usid(a netip.Addr) uint16 {
	b := a.As16()
	return uint16(b[f.lbl()/8])<<8 | uint16(b[f.lbl()/8+1])
}

// nodeLocator is node id's uSID space, block:ID00::/(LBL+8).
func (f usidFormat) nodeLocator(id int) netip.Prefix {
	return netip.PrefixFrom(f.container(uint16(id)<<8), f.lbl()+8)
}

// checkRouteLengths: on every SR node of the lab, iproute2 (the oracle)
// prints each next-csid route with the format's lengths: lblen = the
// block's, nflen 16.
func (l *lab) checkRouteLengths(t *testing.T) {
	t.Helper()
	want := "lblen " + strconv.Itoa(l.f.lbl()) + " nflen 16"
	for _, n := range l.Domain.NodeNames() {
		if l.Domain.Nodes[n].Locator == "" {
			continue
		}
		out := testutil.Exec(t, l.NS(n), "ip", "-6", "route", "show", "table", "all")
		seen := 0
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "next-csid") {
				continue
			}
			seen++
			if !strings.Contains(line, want) {
				t.Errorf("%s: %q: want %q", n, line, want)
			}
		}
		if seen == 0 {
			t.Errorf("%s: no next-csid route (its uN at least)", n)
		}
	}
}

package srv6svc

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TestEndNextCSIDLengths: the bypass route of a uSID binding carries its
// format's lengths in SEG6_LOCAL_FLAVORS (the kernel's defaults are
// F3216's only: an F4816 binding without them would shift at bit 32).
func TestEndNextCSIDLengths(t *testing.T) {
	for _, f := range []CSIDFormat{F3216, F4816, {56, 16}} {
		b, err := endNextCSID{f}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := nl.ParseRouteAttr(b)
		if err != nil {
			t.Fatal(err)
		}
		var lb, nf int
		for _, a := range attrs {
			if a.Attr.Type&^unix.NLA_F_NESTED != seg6LocalFlavors {
				continue
			}
			sub, err := nl.ParseRouteAttr(a.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sub {
				switch s.Attr.Type {
				case seg6LocalFlvLCBlock:
					lb = int(s.Value[0])
				case seg6LocalFlvLCNodeFn:
					nf = int(s.Value[0])
				}
			}
		}
		if lb != f.LBLen || nf != f.NFLen {
			t.Errorf("%s: encoded lblen %d nflen %d", f, lb, nf)
		}
	}
	if _, err := (endNextCSID{}).Encode(); err == nil {
		t.Error("an empty format encoded")
	}
}

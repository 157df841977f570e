package sid

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormatValidate(t *testing.T) {
	tests := []struct {
		f    Format
		good bool
	}{
		{Default, true},
		{Format{16, 0, 0}, true},
		{Format{64, 64, 0}, true},
		{Format{48, 64, 16}, true},
		{Format{15, 48, 16}, false},
		{Format{64, -1, 16}, false},
		{Format{64, 48, -1}, false},
		{Format{64, 65, 0}, false},
		{Format{64, 0, 65}, false},
		{Format{80, 48, 16}, false},
	}
	for _, tt := range tests {
		t.Run(tt.f.String(), func(t *testing.T) {
			err := tt.f.Validate()
			if (err == nil) != tt.good {
				t.Fatalf("Validate() = %v, want good=%v", err, tt.good)
			}
			if err != nil && !errors.Is(err, ErrFormat) {
				t.Errorf("error %v is not ErrFormat", err)
			}
		})
	}
}

func TestComposeSplit(t *testing.T) {
	tests := []struct {
		name        string
		loc         string
		funct, args uint64
		f           Format
		want        string
	}{
		{"thesis", "fc00:2::/64", 0xf1, 0, Default, "fc00:2::f1:0"},
		{"args", "fc00:2::/64", 0xf1, 0xbeef, Default, "fc00:2::f1:beef"},
		{"wide funct", "fc00:2::/64", 0xaaaabbbbcccc, 0x1, Default, "fc00:2::aaaa:bbbb:cccc:1"},
		{"host bits ignored", "fc00:2::5/64", 1, 0, Default, "fc00:2::1:0"},
		{"no args", "2001:db8::/48", 0x1234, 0, Format{48, 64, 0}, "2001:db8::1234:0"},
		{"padding", "2001:db8::/32", 0xff, 0x3, Format{32, 16, 16}, "2001:db8:ff:3::"},
		{"odd bits", "fc00::/20", 0x5, 0x1, Format{20, 12, 4}, "fc00:5:1000::"},
		{"64 bit funct", "fc00::/64", 1<<64 - 1, 0, Format{64, 64, 0}, "fc00::ffff:ffff:ffff:ffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := netip.MustParsePrefix(tt.loc)
			got, err := Compose(loc, tt.funct, tt.args, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if want := netip.MustParseAddr(tt.want); got != want {
				t.Fatalf("Compose = %s, want %s", got, want)
			}
			l, fu, a := Split(got, tt.f)
			if diff := cmp.Diff([]any{loc.Masked(), tt.funct, tt.args}, []any{l, fu, a},
				cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
				t.Errorf("Split (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComposeErrors(t *testing.T) {
	loc := netip.MustParsePrefix("fc00:2::/64")
	tests := []struct {
		name        string
		loc         netip.Prefix
		funct, args uint64
		f           Format
		want        error
	}{
		{"funct overflow", loc, 1 << 48, 0, Default, ErrOverflow},
		{"args overflow", loc, 1, 1 << 16, Default, ErrOverflow},
		{"wrong length", netip.MustParsePrefix("fc00:2::/48"), 1, 0, Default, ErrLocator},
		{"ipv4", netip.MustParsePrefix("10.0.0.0/16"), 1, 0, Format{16, 8, 0}, ErrLocator},
		{"bad format", loc, 1, 0, Format{64, 64, 64}, ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compose(tt.loc, tt.funct, tt.args, tt.f)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Compose error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWithArgsPrefix(t *testing.T) {
	s := netip.MustParseAddr("fc00:2::f1:0")
	got, err := WithArgs(s, 0x2a, Default)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("fc00:2::f1:2a"); got != want {
		t.Errorf("WithArgs = %s, want %s", got, want)
	}
	if _, err := WithArgs(s, 1<<16, Default); !errors.Is(err, ErrOverflow) {
		t.Errorf("WithArgs overflow error = %v", err)
	}
	tests := []struct {
		f    Format
		sid  string
		want string
	}{
		{Default, "fc00:2::f1:2a", "fc00:2::f1:0/112"},
		{Format{64, 64, 0}, "fc00:2::f1", "fc00:2::f1/128"},
		{Format{32, 16, 16}, "2001:db8:ff:3::", "2001:db8:ff::/48"},
	}
	for _, tt := range tests {
		t.Run(tt.f.String(), func(t *testing.T) {
			if got := Prefix(netip.MustParseAddr(tt.sid), tt.f); got != netip.MustParsePrefix(tt.want) {
				t.Errorf("Prefix = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNodeAddr(t *testing.T) {
	tests := []struct {
		loc  string
		f    Format
		want string
	}{
		{"fc00:2::/64", Default, "fc00:2::1"},
		{"fc00:2::/64", Format{64, 64, 0}, "fc00:2::1"},
	}
	for _, tt := range tests {
		t.Run(tt.f.String(), func(t *testing.T) {
			got, err := NodeAddr(netip.MustParsePrefix(tt.loc), tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if got != netip.MustParseAddr(tt.want) {
				t.Errorf("NodeAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func u64(v uint64) *uint64 { return &v }

func names(n int, prefix string) []Request {
	var r []Request
	for i := 0; i < n; i++ {
		r = append(r, Request{Name: fmt.Sprintf("%s%d", prefix, i)})
	}
	return r
}

func TestAllocatePinsAndReserved(t *testing.T) {
	loc := netip.MustParsePrefix("fc00:2::/64")
	reqs := []Request{
		{Name: "fw", Pinned: u64(0xf1)},
		{Name: "nat", PinnedSID: netip.MustParseAddr("fc00:2::f2:0")},
		{Name: "ids"},
	}
	got, err := Allocate("nfv1", loc, Default, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if got["fw"] != netip.MustParseAddr("fc00:2::f1:0") || got["nat"] != netip.MustParseAddr("fc00:2::f2:0") {
		t.Errorf("pins not honoured: %v", got)
	}
	_, f, _ := Split(got["ids"], Default)
	if want := Home("nfv1", "ids", Default); f != want {
		t.Errorf("ids FUNCT = %#x, want its home %#x", f, want)
	}

	bad := []struct {
		name string
		reqs []Request
	}{
		{"funct 0", []Request{{Name: "a", Pinned: u64(0)}}},
		{"same pin", []Request{{Name: "a", Pinned: u64(5)}, {Name: "b", Pinned: u64(5)}}},
		{"sid and funct", []Request{{Name: "a", Pinned: u64(5), PinnedSID: netip.MustParseAddr("fc00:2::5:0")}}},
		{"outside", []Request{{Name: "a", PinnedSID: netip.MustParseAddr("fc00:3::5:0")}}},
		{"args set", []Request{{Name: "a", PinnedSID: netip.MustParseAddr("fc00:2::5:1")}}},
		{"overflow", []Request{{Name: "a", Pinned: u64(1 << 48)}}},
		{"duplicate name", []Request{{Name: "a"}, {Name: "a"}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Allocate("n", loc, Default, tt.reqs); err == nil {
				t.Fatal("Allocate succeeded, want an error")
			}
		})
	}
}

func TestAllocateNoArgsReservesNodeAddr(t *testing.T) {
	// With a 4-bit FUNCT and no ARGS, LOC::1 is FUNCT 1: never handed out.
	f := Format{124, 4, 0}
	loc := netip.MustParsePrefix("fc00:2::/124")
	got, err := Allocate("n", loc, f, names(14, "s"))
	if err != nil {
		t.Fatal(err)
	}
	na, _ := NodeAddr(loc, f)
	seen := map[netip.Addr]string{na: "node"}
	for n, a := range got {
		if o, dup := seen[a]; dup {
			t.Errorf("%s and %s share %s", n, o, a)
		}
		seen[a] = n
	}
	if _, err := Allocate("n", loc, f, names(15, "s")); !errors.Is(err, ErrExhausted) {
		t.Errorf("15 requests in 14 free values: error %v, want ErrExhausted", err)
	}
}

// TestAllocateProperties checks, over many sets, that allocation is
// deterministic (independent of request order), collision-free, and stable:
// adding or removing one service never moves a service whose home FUNCT is
// uncontested, and in practice moves none at all.
func TestAllocateProperties(t *testing.T) {
	loc := netip.MustParsePrefix("fc00:9::/64")
	for _, f := range []Format{Default, {64, 10, 0}} {
		for _, n := range []int{1, 5, 40, 200} {
			t.Run(fmt.Sprintf("%s/%d", f, n), func(t *testing.T) {
				if lo, hi := Range(f); uint64(n+2) > hi-lo+1 {
					t.Skip("range too small")
				}
				base := names(n, "svc-")
				a1, err := Allocate("node", loc, f, base)
				if err != nil {
					t.Fatal(err)
				}
				rev := append([]Request(nil), base...)
				for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
					rev[i], rev[j] = rev[j], rev[i]
				}
				a2, err := Allocate("node", loc, f, rev)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(a1, a2, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
					t.Fatalf("order changed the allocation (-first +second):\n%s", diff)
				}
				checkUnique(t, loc, f, a1, n)

				homes := map[uint64]int{}
				for _, r := range base {
					homes[Home("node", r.Name, f)]++
				}
				moved, movedContested := 0, 0
				for k := 0; k < 20; k++ {
					// Add one.
					added := append(append([]Request(nil), base...), Request{Name: fmt.Sprintf("new-%d", k)})
					b, err := Allocate("node", loc, f, added)
					if err != nil {
						t.Fatal(err)
					}
					checkUnique(t, loc, f, b, n+1)
					newHome := Home("node", added[len(added)-1].Name, f)
					for name, a := range a1 {
						if b[name] == a {
							continue
						}
						h := Home("node", name, f)
						if homes[h] == 1 && h != newHome {
							t.Errorf("adding %s moved %s (uncontested home %#x) from %s to %s",
								added[len(added)-1].Name, name, h, a, b[name])
						}
						movedContested++
					}
					// Remove one.
					if n > 1 {
						removed := append(append([]Request(nil), base[:k%n]...), base[k%n+1:]...)
						c, err := Allocate("node", loc, f, removed)
						if err != nil {
							t.Fatal(err)
						}
						for name, a := range c {
							if a1[name] != a {
								h := Home("node", name, f)
								if homes[h] == 1 {
									t.Errorf("removing %s moved %s (uncontested home)", base[k%n].Name, name)
								}
								moved++
							}
						}
					}
				}
				t.Logf("format %s, %d services: %d moves on add, %d on remove (all contested)", f, n, movedContested, moved)
			})
		}
	}
}

func checkUnique(t *testing.T, loc netip.Prefix, f Format, m map[string]netip.Addr, n int) {
	t.Helper()
	if len(m) != n {
		t.Fatalf("allocated %d SIDs, want %d", len(m), n)
	}
	na, _ := NodeAddr(loc, f)
	_, reserved, _ := Split(na, f)
	seen := map[netip.Addr]string{}
	for name, a := range m {
		if o, dup := seen[a]; dup {
			t.Fatalf("%s and %s share %s", name, o, a)
		}
		seen[a] = name
		l, fu, args := Split(a, f)
		if l != loc || args != 0 || fu == 0 || fu == reserved {
			t.Fatalf("%s: bad SID %s (loc %s funct %#x args %#x)", name, a, l, fu, args)
		}
	}
}

func TestAllocateDeterministicAcrossRuns(t *testing.T) {
	// Golden values: a change to the hash would renumber every deployed SID.
	got, err := Allocate("nfv1", netip.MustParsePrefix("fc00:2::/64"), Default, []Request{{Name: "nfv1-end"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]netip.Addr{"nfv1-end": netip.MustParseAddr("fc00:2::646c:0")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

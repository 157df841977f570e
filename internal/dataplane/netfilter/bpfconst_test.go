package netfilter

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
	"github.com/segchain/segchain/internal/service/netfilter"
)

// TestBPFConstMatchesProgram fails when the Go tables drift from the
// compiled program.
func TestBPFConstMatchesProgram(t *testing.T) {
	spec, err := loadNfTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckDropEnum(spec, "nf_drop_reason", numDropReasons, func(r uint32) string { return DropReason(r).String() }); err != nil {
		t.Error(err)
	}
	for m, want := range map[string]uint32{"nf_sids": MaxSIDs, "nf_slots": numSlots, "nf_stats_map": MaxSIDs + 1} {
		if err := bpfconst.CheckMapSize(spec, m, want); err != nil {
			t.Error(err)
		}
	}
	if n := len(nfTCNfSlot{}.Hdr); n != MaxHeader {
		t.Errorf("nf_slot holds %d header bytes, Go expects %d", n, MaxHeader)
	}
	if n := len(nfTCNfStats{}.Drops); n != numDropReasons {
		t.Errorf("nf_stats has %d drop counters, Go expects %d", n, numDropReasons)
	}
}

// TestParseParams: the `sid add` syntax and its errors.
func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		sid    string
		params []string
		err    bool
		bits   int
	}{
		{"fc00:e::/112", nil, false, 0},
		{"fc00:e::/112", []string{"args", "16"}, false, 16},
		{"fc00:e::/112", []string{"ARGS", "0"}, false, 0},
		{"fc00:e::/112", []string{"args", "17"}, true, 0},
		{"fc00:e::/64", []string{"args", "33"}, true, 0},
		{"fc00:e::/64", []string{"args"}, true, 0},
		{"fc00:e::/64", []string{"args", "x"}, true, 0},
		{"fc00:e::/64", []string{"dev", "eth0"}, true, 0},
	} {
		in, err := ParseParams(mustPrefix(tc.sid), tc.params)
		if (err != nil) != tc.err || (err == nil && in.ArgsBits != tc.bits) {
			t.Errorf("%s %v: got %+v, %v", tc.sid, tc.params, in, err)
		}
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestIntentLimitsMatchProgram: the limits config validates against
// (the kind's intent half) are the program's.
func TestIntentLimitsMatchProgram(t *testing.T) {
	if netfilter.MaxSIDs != MaxSIDs || netfilter.MaxHeader != MaxHeader {
		t.Errorf("intent half: %d SIDs, %d header bytes; program: %d, %d", netfilter.MaxSIDs, netfilter.MaxHeader, MaxSIDs, MaxHeader)
	}
}

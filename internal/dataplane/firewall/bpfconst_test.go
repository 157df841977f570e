package firewall

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
	"github.com/segchain/segchain/internal/service/firewall"
)

// TestBPFConstMatchesProgram fails when the Go tables drift from the
// compiled program: a drop reason without a name, or a limit that is not
// the size of the map it bounds.
func TestBPFConstMatchesProgram(t *testing.T) {
	spec, err := loadFwTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckDropEnum(spec, "fw_drop_reason", numDropReasons, func(r uint32) string { return DropReason(r).String() }); err != nil {
		t.Error(err)
	}
	for m, want := range map[string]uint32{
		"fw_sids":       MaxInstances,
		"fw_tables":     maxTables,
		"fw_rules":      maxTables * MaxRules,
		"fw_rule_stats": maxTables * MaxRules,
		"fw_bitmaps":    maxBitmaps,
		"fw_blocks":     maxBlocks * 256,
		"fw_args":       maxArgs,
	} {
		if err := bpfconst.CheckMapSize(spec, m, want); err != nil {
			t.Error(err)
		}
	}
	if n := len(fwTCFwStats{}.Drops); n != numDropReasons {
		t.Errorf("fw_stats has %d drop counters, Go expects %d", n, numDropReasons)
	}
	if n := len(fwTCFwBitmap{}.Words); n != words {
		t.Errorf("fw_bitmap has %d words, Go expects %d", n, words)
	}
}

// TestIntentLimitsMatchProgram: the limits config validates against
// (the kind's intent half) are the program's.
func TestIntentLimitsMatchProgram(t *testing.T) {
	if firewall.MaxRules != MaxRules || firewall.MaxInstances != MaxInstances {
		t.Errorf("intent half: %d rules, %d instances; program: %d, %d", firewall.MaxRules, firewall.MaxInstances, MaxRules, MaxInstances)
	}
}

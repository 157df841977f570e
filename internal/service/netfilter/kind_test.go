package netfilter

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/service"
)

func TestTables(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
		err  string
	}{
		{"table inet f {\n chain c { }\n}\n", []string{"inet f"}, ""},
		{"table t {}\nadd table ip6 u\ncreate table netdev v\ntable inet f {}\ntable t {}", []string{"ip t", "ip6 u", "netdev v", "inet f"}, ""},
		{"# table inet x\nadd rule inet f c drop\n", nil, "declares no table"},
		{"flush ruleset\ntable inet f {}\n", nil, "flush ruleset"},
	} {
		got, err := Tables(tc.text)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Tables(%q) = %v, %v; want %v, %q", tc.text, got, err, tc.want, tc.err)
		}
	}
}

// TestPlanAndValidate: every problem has its path; a planned service
// carries the file's text and round-trips through its Spec.
func TestPlanAndValidate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ok.nft"), []byte("table inet f {\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n40, n8 := 40, 8
	bad := Kind{}.Validate(service.Input{Dir: dir, ArgsBits: 16, Block: &Config{Args: &n40, Ruleset: "missing.nft"}})
	var paths []string
	for _, e := range bad {
		paths = append(paths, e.Path)
	}
	if !reflect.DeepEqual(paths, []string{"netfilter.args", "netfilter.ruleset"}) {
		t.Errorf("errors %v", bad)
	}
	in := service.Input{Name: "nf", Dir: dir, ArgsBits: 16, Prefix: netip.MustParsePrefix("fc00:3::e0:0/112"),
		Block: &Config{Args: &n8, Ruleset: "ok.nft"}}
	if errs := (Kind{}).Validate(in); len(errs) != 0 {
		t.Fatal(errs)
	}
	s, err := Kind{}.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := SpecOf(s)
	if err != nil || sp.ArgsBits != 8 || sp.Ruleset != "table inet f {\n}\n" || !reflect.DeepEqual(sp.Tables, []string{"inet f"}) || sp.SID != in.Prefix {
		t.Errorf("spec %+v, %v", sp, err)
	}
	// Default ARGS width: the format's.
	in.Block = nil
	s, _ = Kind{}.Plan(in)
	if sp, _ := SpecOf(s); sp.ArgsBits != 16 || sp.Ruleset != "" {
		t.Errorf("defaults: %+v", sp)
	}
}

package bpfconst

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{
		"FW_DROP_BAD_SRH":           "DropBadSRH",
		"PROXY_DROP_HDR_TOO_LONG":   "DropHdrTooLong",
		"PROXY_DROP_GSO_L2":         "DropGSOL2",
		"PROXY_DROP_SL_ZERO":        "DropSLZero",
		"BND_DROP_HMAC_UNKNOWN_KEY": "DropHMACUnknownKey",
	} {
		got, err := GoName(c)
		if err != nil || got != want {
			t.Errorf("GoName(%s) = %q, %v; want %q", c, got, err, want)
		}
	}
	if _, err := GoName("FW_F_SRC"); err == nil {
		t.Error("GoName(FW_F_SRC): no error")
	}
}

func TestParseEnum(t *testing.T) {
	src := `enum x_drop_reason {
	X_DROP_A, /* "a" */
	X_DROP_BAD_SRH,	/* "bad-srh": why */
	/* a comment line */
	X_DROP_C = 5, /* "c" */
	X_DROP_MAX,
};`
	e, err := ParseEnum(src, "x_drop_reason")
	if err != nil {
		t.Fatal(err)
	}
	want := []Reason{{"X_DROP_A", "DropA", "a", 0}, {"X_DROP_BAD_SRH", "DropBadSRH", "bad-srh", 1}, {"X_DROP_C", "DropC", "c", 5}}
	if len(e.Reasons) != len(want) || e.Max != "X_DROP_MAX" {
		t.Fatalf("got %+v", e)
	}
	for i := range want {
		if e.Reasons[i] != want[i] {
			t.Errorf("reason %d = %+v, want %+v", i, e.Reasons[i], want[i])
		}
	}
}

func TestParseEnumErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no name":    "enum e {\n\tX_DROP_A,\n\tX_DROP_MAX,\n};",
		"duplicate":  "enum e {\n\tX_DROP_A, /* \"a\" */\n\tX_DROP_B, /* \"a\" */\n\tX_DROP_MAX,\n};",
		"no max":     "enum e {\n\tX_DROP_A, /* \"a\" */\n};",
		"two a line": "enum e {\n\tX_DROP_A, X_DROP_B,\n\tX_DROP_MAX,\n};",
		"missing":    "enum f {\n};",
	} {
		if _, err := ParseEnum(src, "e"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseDefines(t *testing.T) {
	src := "#define A 4096 /* a */\n#define B (A / 64)\n#define C 0x80000000U\n"
	d, err := ParseDefines(src, map[string]string{"C": "c", "A": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || d[0] != (Define{"A", "a", "4096", "a"}) || d[1] != (Define{"C", "c", "0x80000000", ""}) {
		t.Errorf("got %+v", d)
	}
	if _, err := ParseDefines(src, map[string]string{"B": "b"}); err == nil {
		t.Error("an expression define: no error")
	}
}

var genLine = regexp.MustCompile(`(?m)^//go:generate go run github.com/segchain/segchain/cmd/bpfconst (.*)$`)

// TestGeneratedFilesCurrent is `make check-generated` for the bpfconst
// files, without running go generate: every //go:generate bpfconst line
// of the repository must produce exactly its committed file. It also
// requires every drop-reason enum of bpf/*.bpf.c to be exported.
func TestGeneratedFilesCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	var gens []string
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "gen.go" {
			gens = append(gens, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, g := range gens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range genLine.FindAllStringSubmatch(string(b), -1) {
			args := strings.Fields(m[1])
			pkg := filepath.Base(filepath.Dir(g))
			out, code, err := Generate(args, filepath.Dir(g), pkg)
			if err != nil {
				t.Errorf("%s: %v", g, err)
				continue
			}
			have, err := os.ReadFile(out)
			if err != nil {
				t.Errorf("%s: %v (run make generate)", g, err)
				continue
			}
			if !bytes.Equal(have, code) {
				t.Errorf("%s is stale: run make generate and commit", out)
			}
			for i, a := range args {
				if a == "-enum" && i+1 < len(args) {
					exported[args[i+1]] = true
				}
			}
		}
	}
	srcs, _ := filepath.Glob(filepath.Join(root, "bpf", "*.bpf.c"))
	enumDecl := regexp.MustCompile(`(?m)^enum (\w+_drop_reason) \{`)
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range enumDecl.FindAllStringSubmatch(string(b), -1) {
			if !exported[m[1]] {
				t.Errorf("%s: enum %s has no bpfconst line in its package's gen.go", s, m[1])
			}
		}
	}
	if len(exported) == 0 {
		t.Error("no bpfconst -enum line found")
	}
}

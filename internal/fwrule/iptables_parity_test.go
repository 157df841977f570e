package fwrule

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deliberatelyUnsupported are the constructs iptables accepts and segchain
// refuses on purpose (docs/firewall.md, "Differences from iptables"). An
// OK line of iptables' test files that segchain refuses must contain one
// of them, and the refusal must say the construct is not supported.
var deliberatelyUnsupported = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(^|\s)(-i|-o|--in-interface|--out-interface)(\s|=)|(^|\s)-[io]\S`), "interface matches"},
	{regexp.MustCompile(`--tcp-flags|--syn\b`), "TCP flag matches"},
	{regexp.MustCompile(`--chunk-types`), "SCTP chunk matches"},
	{regexp.MustCompile(`-j\s*RETURN`), "RETURN (no chains)"},
	{regexp.MustCompile(`/255\.0\.(255|12)\.0`), "non-contiguous IPv4 masks"},
}

// tLine is one rule line of an iptables .t file.
type tLine struct {
	file string
	num  int
	rule string
	ok   bool // iptables accepts it
}

// readT returns the lines of a .t file that apply to the FORWARD chain.
func readT(t *testing.T, path string) []tLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tLine
	forward := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, ":"):
			forward = false
			for _, c := range strings.Split(l[1:], ",") {
				forward = forward || strings.TrimSpace(c) == "FORWARD"
			}
			continue
		}
		if !forward {
			continue
		}
		f := strings.Split(l, ";")
		if len(f) != 3 || (f[2] != "OK" && f[2] != "FAIL") {
			t.Fatalf("%s:%d: not RULE;OUTPUT;OK|FAIL: %q", path, n, l)
		}
		out = append(out, tLine{file: filepath.Base(path), num: n, rule: f[0], ok: f[2] == "OK"})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIptablesParity runs iptables' own extension test files through the
// parser: every rule iptables accepts is accepted (or refused as
// deliberately unsupported), every rule it refuses is refused.
//
// iptables allows a rule without a target (it only counts); segchain's
// rules need a verdict, so a line without -j is tested with -j ACCEPT
// appended (TestParseNeedsTarget covers the target-less form).
func TestIptablesParity(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "iptables", "*.t"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no iptables test files: %v", err)
	}
	jump := regexp.MustCompile(`(^|\s)(-j|--jump)(\s|=)|(^|\s)-j[A-Z]`)
	lines := 0
	for _, path := range files {
		var fams []Family
		switch base := filepath.Base(path); {
		case strings.HasPrefix(base, "libipt_"):
			fams = []Family{IPv4}
		case strings.HasPrefix(base, "libip6t_"):
			fams = []Family{IPv6}
		case strings.HasPrefix(base, "libxt_"):
			fams = []Family{IPv4, IPv6}
		default:
			t.Fatalf("%s: unknown family", base)
		}
		for _, l := range readT(t, path) {
			for _, fam := range fams {
				lines++
				rule := l.rule
				if !jump.MatchString(rule) {
					rule += " -j ACCEPT"
				}
				name := strings.TrimSuffix(l.file, ".t") + "/" + famName(fam) + "/" + l.rule
				if len(name) > 120 {
					name = name[:120]
				}
				t.Run(name, func(t *testing.T) {
					words, err := SplitWords(rule)
					if err != nil {
						t.Fatalf("%s:%d: split: %v", l.file, l.num, err)
					}
					_, err = Parse(words, fam)
					var unsupported string
					for _, u := range deliberatelyUnsupported {
						if u.re.MatchString(l.rule) {
							unsupported = u.why
						}
					}
					switch {
					case !l.ok && err == nil:
						t.Errorf("%s:%d: iptables refuses %q, segchain accepts it", l.file, l.num, l.rule)
					case l.ok && err != nil && unsupported == "":
						t.Errorf("%s:%d: iptables accepts %q, segchain refuses it: %v", l.file, l.num, l.rule, err)
					case l.ok && err != nil && !strings.Contains(err.Error(), "not supported") && !strings.Contains(err.Error(), "unsupported"):
						t.Errorf("%s:%d: %q (%s) refused without saying it is unsupported: %v", l.file, l.num, l.rule, unsupported, err)
					case l.ok && err == nil && unsupported != "":
						t.Errorf("%s:%d: %q accepted, but the test lists %s as unsupported: update deliberatelyUnsupported and docs/firewall.md", l.file, l.num, l.rule, unsupported)
					}
				})
			}
		}
	}
	if lines < 150 {
		t.Errorf("only %d rule lines tested", lines)
	}
}

// TestParseNeedsTarget: a rule without -j, which iptables accepts (it only
// counts), is refused as unsupported.
func TestParseNeedsTarget(t *testing.T) {
	_, err := Parse([]string{"-s", "2001:db8::/32"}, IPv6)
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("rule without target: %v, want a refusal saying it is not supported", err)
	}
}

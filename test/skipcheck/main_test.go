package main

import (
	"strings"
	"testing"
)

const mod = "github.com/segchain/segchain/"

// events builds test2json lines.
func events(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func ev(action, pkg, test, output string) string {
	s := `{"Action":"` + action + `","Package":"` + mod + pkg + `"`
	if test != "" {
		s += `,"Test":"` + test + `"`
	}
	if output != "" {
		s += `,"Output":` + quote(output)
	}
	return s + "}"
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func TestCommittedAllowlistParses(t *testing.T) {
	rules, err := readRules("allow.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 || len(rules) > 10 {
		t.Errorf("allowlist has %d entries: it must stay short", len(rules))
	}
}

func TestCheck(t *testing.T) {
	rules, err := parseRules(`
internal/x\.TestVRF/End\.DT4 | no VRF | no VRF in this kernel
short .* | skipped with -short | privileged
`, "test")
	if err != nil {
		t.Fatal(err)
	}
	stream := func(skipMsg string) string {
		return events(
			ev("start", "internal/x", "", ""),
			ev("run", "internal/x", "TestA", ""),
			ev("output", "internal/x", "TestA", "=== RUN   TestA\n"),
			ev("output", "internal/x", "TestA", "--- PASS: TestA (0.00s)\n"),
			ev("pass", "internal/x", "TestA", ""),
			ev("output", "internal/x", "TestVRF/End.DT4", "    x_test.go:9: "+skipMsg+"\n"),
			ev("output", "internal/x", "TestVRF/End.DT4", "--- SKIP: TestVRF/End.DT4 (0.00s)\n"),
			ev("skip", "internal/x", "TestVRF/End.DT4", ""),
			ev("pass", "internal/x", "TestVRF", ""),
			ev("output", "internal/x", "", "ok  \tgithub.com/segchain/segchain/internal/x\t0.1s\n"),
			ev("pass", "internal/x", "", ""),
		)
	}
	var out strings.Builder
	s := check(strings.NewReader(stream("End.DT4: no VRF device")), &out, rules, false, mod)
	if !s.report(&out) || s.passed != 2 || len(s.skips) != 1 {
		t.Errorf("allowed skip: passed %d, skips %+v\n%s", s.passed, s.skips, out.String())
	}
	if !strings.Contains(out.String(), "skipped    1: no VRF in this kernel") {
		t.Errorf("counts by reason missing:\n%s", out.String())
	}

	// The same test skipping for another reason is unexpected.
	out.Reset()
	s = check(strings.NewReader(stream("cannot mount bpffs: permission denied")), &out, rules, false, mod)
	if s.report(&out) {
		t.Errorf("an unexpected skip passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "UNEXPECTED SKIP internal/x.TestVRF/End.DT4: cannot mount bpffs") {
		t.Errorf("report does not name the unexpected skip:\n%s", out.String())
	}

	// "short" entries apply only to -short runs.
	out.Reset()
	s = check(strings.NewReader(stream("privileged namespace test: skipped with -short")), &out, rules, false, mod)
	if s.report(&out) {
		t.Errorf("a -short skip passed a full run:\n%s", out.String())
	}
	out.Reset()
	s = check(strings.NewReader(stream("privileged namespace test: skipped with -short")), &out, rules, true, mod)
	if !s.report(&out) {
		t.Errorf("a -short skip failed a -short run:\n%s", out.String())
	}
}

func TestCheckFailures(t *testing.T) {
	var out strings.Builder
	s := check(strings.NewReader(events(
		ev("start", "internal/x", "", ""),
		ev("output", "internal/x", "TestB", "    x_test.go:3: boom\n"),
		ev("output", "internal/x", "TestB", "--- FAIL: TestB (0.00s)\n"),
		ev("fail", "internal/x", "TestB", ""),
		ev("fail", "internal/x", "", ""),
		ev("start", "internal/y", "", ""), // never ends: killed
	)), &out, nil, false, mod)
	if s.report(&out) {
		t.Errorf("a failed run passed:\n%s", out.String())
	}
	for _, want := range []string{"x_test.go:3: boom", "0 passed, 1 failed", "INCOMPLETE internal/y"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, bad := range []string{"TestX | msg", "TestX | msg |  ", "Test( | msg | why", "TestX | ( | why"} {
		if _, err := parseRules(bad, "f"); err == nil {
			t.Errorf("parseRules(%q) accepted it", bad)
		}
	}
}

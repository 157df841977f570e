// Command skipcheck runs `go test -json ...` and fails when a test skipped
// for a reason not in the committed allowlist, so a green run cannot hide
// tests that never ran (an environment error turned into a skip, a probe
// that wrongly says "unsupported"). It prints what `go test` prints
// without -v (failing tests' output, one line per package) and the counts:
// passed, failed, skipped by reason.
//
//	skipcheck [-allow FILE] [-short] -- go test -json ./...
//	go test -json ./... | skipcheck [-allow FILE] [-short]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

// rule is one allowlist entry: a skip of a test matching Test (import path
// without the module, ".", test name) with a message matching Message is
// expected, for the reason Why.
type rule struct {
	Test, Message *regexp.Regexp
	Why           string
	Short         bool // only in -short runs
	Line          int
}

func main() {
	allow := flag.String("allow", "test/skipcheck/allow.txt", "allowlist `file`")
	short := flag.Bool("short", false, "the run is -short: entries marked short apply too")
	module := flag.String("module", "github.com/segchain/segchain", "module path trimmed from package names")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: skipcheck [-allow FILE] [-short] -- go test -json PACKAGES...\n"+
			"       skipcheck [-allow FILE] [-short] < saved-go-test-json\n\n"+
			"Runs the command, prints failing tests' output and per-package results, then\n"+
			"counts passed, failed and skipped tests (by allowlist reason). Exits 1 when a\n"+
			"test failed, the command failed, or a test skipped for a reason the allowlist\n"+
			"does not name. Allowlist lines: [short] TEST-REGEXP | MESSAGE-REGEXP | WHY\n"+
			"(fields separated by \" | \"; a regexp's own | without spaces).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	rules, err := readRules(*allow)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	trim := *module + "/"
	if flag.NArg() == 0 { // a saved `go test -json` output on stdin
		s := check(os.Stdin, os.Stdout, rules, *short, trim)
		if !s.report(os.Stdout) {
			os.Exit(1)
		}
		return
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(2)
	}
	s := check(stdout, os.Stdout, rules, *short, trim)
	runErr := cmd.Wait()
	ok := s.report(os.Stdout)
	if runErr != nil {
		fmt.Printf("skipcheck: %s: %v\n", strings.Join(flag.Args(), " "), runErr)
		ok = false
	}
	if !ok {
		os.Exit(1)
	}
}

// readRules parses the allowlist: blank lines and # comments ignored.
func readRules(path string) ([]*rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read allowlist: %w", err)
	}
	return parseRules(string(b), path)
}

func parseRules(text, name string) ([]*rule, error) {
	var rules []*rule
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := &rule{Line: i + 1}
		if rest, ok := strings.CutPrefix(line, "short "); ok {
			r.Short, line = true, rest
		}
		f := strings.Split(line, " | ") // a regexp's own | has no spaces
		if len(f) != 3 || strings.TrimSpace(f[2]) == "" {
			return nil, fmt.Errorf("%s:%d: want TEST-REGEXP | MESSAGE-REGEXP | WHY", name, i+1)
		}
		var err error
		if r.Test, err = regexp.Compile("^(?:" + strings.TrimSpace(f[0]) + ")$"); err != nil {
			return nil, fmt.Errorf("%s:%d: test: %w", name, i+1, err)
		}
		if r.Message, err = regexp.Compile(strings.TrimSpace(f[1])); err != nil {
			return nil, fmt.Errorf("%s:%d: message: %w", name, i+1, err)
		}
		r.Why = strings.TrimSpace(f[2])
		rules = append(rules, r)
	}
	return rules, nil
}

// skip is one skipped test with its message.
type skip struct {
	Test, Message string
	Rule          *rule // nil: unexpected
}

type summary struct {
	passed, failed int
	skips          []skip
	started        map[string]bool // packages without a final action yet
	failedPkgs     []string
}

// check reads test2json events from r, echoes what go test prints without
// -v to w, and matches every skip against rules.
func check(r io.Reader, w io.Writer, rules []*rule, short bool, trim string) *summary {
	s := &summary{started: map[string]bool{}}
	buf := map[string][]string{} // package.Test → output lines
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // not test2json: show it
			continue
		}
		key := strings.TrimPrefix(e.Package, trim) + "." + e.Test
		switch e.Action {
		case "start":
			s.started[strings.TrimPrefix(e.Package, trim)] = true
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "output":
			if e.Test == "" {
				if o := strings.TrimSpace(e.Output); o != "PASS" && !strings.HasPrefix(o, "=== ") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			if !strings.HasPrefix(strings.TrimSpace(e.Output), "=== ") {
				buf[key] = append(buf[key], e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				delete(s.started, strings.TrimPrefix(e.Package, trim))
				if e.Action == "fail" {
					s.failedPkgs = append(s.failedPkgs, e.Package)
				}
				continue
			}
			switch e.Action {
			case "pass":
				s.passed++
			case "fail":
				s.failed++
				fmt.Fprint(w, strings.Join(buf[key], ""))
			case "skip":
				msg := skipMessage(buf[key])
				sk := skip{Test: key, Message: msg}
				for _, ru := range rules {
					if (!ru.Short || short) && ru.Test.MatchString(key) && ru.Message.MatchString(msg) {
						sk.Rule = ru
						break
					}
				}
				if sk.Rule == nil {
					fmt.Fprint(w, strings.Join(buf[key], ""))
				}
				s.skips = append(s.skips, sk)
			}
			delete(buf, key)
		}
	}
	return s
}

// skipMessage is what the test logged before it skipped, without the
// "--- SKIP" line and the file:line prefixes.
func skipMessage(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "--- SKIP") || t == "" {
			continue
		}
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") {
			t = t[i+2:]
		}
		msg = append(msg, t)
	}
	return strings.Join(msg, " ")
}

// report prints the counts and every unexpected skip; it says whether the
// run is green.
func (s *summary) report(w io.Writer) bool {
	ok := true
	byWhy := map[string]int{}
	var unexpected []skip
	for _, sk := range s.skips {
		if sk.Rule == nil {
			unexpected = append(unexpected, sk)
			continue
		}
		byWhy[sk.Rule.Why]++
	}
	fmt.Fprintf(w, "\nskipcheck: %d passed, %d failed, %d skipped (%d unexpected)\n",
		s.passed, s.failed, len(s.skips), len(unexpected))
	whys := make([]string, 0, len(byWhy))
	for k := range byWhy {
		whys = append(whys, k)
	}
	sort.Strings(whys)
	for _, k := range whys {
		fmt.Fprintf(w, "  skipped %4d: %s\n", byWhy[k], k)
	}
	for _, sk := range unexpected {
		fmt.Fprintf(w, "  UNEXPECTED SKIP %s: %s\n", sk.Test, sk.Message)
		ok = false
	}
	if len(unexpected) > 0 {
		fmt.Fprintln(w, "skipcheck: a skip not in the allowlist is a test that did not run: fix its cause, or add it with its reason to the allowlist")
	}
	if s.failed > 0 || len(s.failedPkgs) > 0 {
		ok = false
	}
	pkgs := make([]string, 0, len(s.started))
	for p := range s.started {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Fprintf(w, "  INCOMPLETE %s: no result (killed or output cut)\n", p)
		ok = false
	}
	return ok
}

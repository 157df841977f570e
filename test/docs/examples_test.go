// Package docs runs every `segchain …` example of the manual — the --help
// texts, README.md's "Using it" section and docs/*.md — against a lab of
// its own, so that the documentation cannot drift from the program.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

var bin string // the segchain binary under test

func TestMain(m *testing.M) { os.Exit(testutil.MainWithBinary(m, &bin)) }

// example is one command line of the manual.
type example struct {
	source  string // file:line or "segchain X --help"
	group   string // examples of a group run in order on one fresh lab
	cmd     string
	wantErr string // for "$ segchain …" followed by "segchain: …": the error the manual shows
}

// skips are the examples a test cannot run, each with its reason. They are
// counted and reported; keep the list short.
var skips = []struct{ match, reason string }{
	{"segchain perf run", "a benchmark run takes minutes"},
	{"segchain perf limit", "measures the machine for seconds per figure; perf's own tests cover it"},
	{"segchain perf boundary", "a benchmark run takes minutes"},
	{"segchain perf pools", "a benchmark run takes minutes"},
	{"segchain perf oam", "a benchmark run takes minutes"},
	{"segchain perf control-plane", "a benchmark run takes minutes"},
	{"segchain agent --node", "a daemon that runs until stopped; test/agents runs real agents"},
	{"lab restart-agents", "needs a lab brought up with --agents; test/agents restarts real agents"},
	{"two-hosts.yaml", "needs the two hosts of the docs/deploy.md walk-through"},
	{"lab down --all-owned", "takes down every lab on the machine, other users' too"},
	{"tcpdump -ni", "runs tcpdump until interrupted"},
	{"fw import fc00:2::f1:0/112 rules.v6", "needs the reader's own rules file"},
}

// placeholders mark a synopsis line (a usage form, not an example).
var placeholderRE = regexp.MustCompile(`\b(FILE|NAME|IFACE|SID|NODE|CMD|ARGS|DEV|POS|RULE|VALUE|ACTION|KEYID|BEHAVIOR|PARAMS|LEN|DIR|NS|PREFIX|ADDR|EXP|DOMAIN|IPV6|IPV4|N)\b|\[|\.\.\.|\|\s*--`)

func isSynopsis(cmd string) bool { return placeholderRE.MatchString(cmd) }

// fromText extracts the examples of one text: lines (in code blocks, for
// Markdown) that run segchain, with "$ " prompts and "# " comment marks
// removed, trailing "# comments" cut.
func fromText(source, text string, markdown bool) []example {
	var out []example
	inBlock := !markdown
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		l := strings.TrimSpace(raw)
		if !markdown && !strings.HasPrefix(raw, " ") {
			continue // help texts indent their examples; prose starts at column 0
		}
		if markdown && strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		prompt := strings.HasPrefix(l, "$ ")
		l = strings.TrimPrefix(strings.TrimPrefix(l, "$ "), "# ")
		if !strings.HasPrefix(l, "segchain ") && !regexp.MustCompile(`^(ip netns exec \S+ |\S+ \| )segchain `).MatchString(l) {
			continue
		}
		if j := strings.Index(l, "  #"); j > 0 {
			l = strings.TrimSpace(l[:j])
		}
		ex := example{source: fmt.Sprintf("%s:%d", source, i+1), cmd: l}
		if prompt && i+1 < len(lines) {
			if next := strings.TrimSpace(lines[i+1]); strings.HasPrefix(next, "segchain: ") {
				ex.wantErr = strings.TrimPrefix(next, "segchain: ")
			}
		}
		out = append(out, ex)
	}
	return out
}

// helpExamples walks every verb's --help and returns the examples of its
// Examples section and of its long text.
func helpExamples(t *testing.T) []example {
	var out []example
	seen := map[string]bool{}
	queue := [][]string{{}}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		name := strings.Join(append([]string{"segchain"}, path...), " ")
		if seen[name] {
			continue
		}
		seen[name] = true
		b, err := exec.Command(bin, append(path, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", name, err, b)
		}
		help := string(b)
		// Subcommands.
		if i := strings.Index(help, "Available Commands:\n"); i >= 0 {
			sc := bufio.NewScanner(strings.NewReader(help[i+len("Available Commands:\n"):]))
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 0 {
					break
				}
				if f[0] != "help" && f[0] != "completion" {
					queue = append(queue, append(append([]string(nil), path...), f[0]))
				}
			}
		}
		// Everything before "Usage:" is the long text; "Examples:" up to
		// the flags.
		text := help
		if i := strings.Index(help, "\nUsage:"); i >= 0 {
			text = help[:i]
			if j := strings.Index(help, "\nExamples:\n"); j >= 0 {
				ex := help[j:]
				if k := strings.Index(ex, "\nAvailable Commands:"); k >= 0 {
					ex = ex[:k]
				} else if k := strings.Index(ex, "\nFlags:"); k >= 0 {
					ex = ex[:k]
				}
				text += "\n" + ex
			}
		}
		for _, e := range fromText(name+" --help", text, false) {
			e.group = helpGroup(name)
			out = append(out, e)
		}
	}
	return out
}

// helpGroup groups the sub-verbs of sid and fw with their parent: their
// examples build on each other (fw's rules need the End.AN.FW instance the
// fw manual creates first).
func helpGroup(name string) string {
	for _, g := range []string{"segchain fw", "segchain sid"} {
		if strings.HasPrefix(name, g) {
			return g
		}
	}
	return name
}

// setups prepare what a group's examples assume of "this node" (the lab's
// nfv1) beyond the default lab, as shell commands run there.
var setups = map[string]string{
	// fw import reads the node's ip6tables rules: give it one.
	"segchain fw":      "ip6tables -A FORWARD -p tcp --dport 22 -j DROP",
	"docs/firewall.md": "ip6tables -A FORWARD -p tcp --dport 22 -j DROP",
	// The proxy examples face SFs on interfaces sf0..sf6.
	"docs/proxies.md": "for i in 0 1 2 3 4 5 6; do ip link add sf$i type veth peer name sf${i}p && ip link set sf$i up && ip link set sf${i}p up || exit 1; done",
}

// docExamples returns the examples of README.md's "Using it" section and
// of every docs/*.md.
func docExamples(t *testing.T) []example {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	r := string(readme)
	start := strings.Index(r, "## Using it")
	if start < 0 {
		t.Fatal(`README.md has no "Using it" section`)
	}
	// Keep line numbers: blank out what precedes the section.
	pre := strings.Count(r[:start], "\n")
	sec := r[start:]
	if end := strings.Index(sec[3:], "\n## "); end >= 0 {
		sec = sec[:end+3]
	}
	var out []example
	for _, e := range fromText("README.md", strings.Repeat("\n", pre)+sec, true) {
		e.group = "README.md"
		out = append(out, e)
	}
	files, _ := filepath.Glob("../../docs/*.md")
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := "docs/" + filepath.Base(f)
		for _, e := range fromText(src, string(b), true) {
			e.group = src
			out = append(out, e)
		}
	}
	return out
}

// TestExampleExtraction runs without privileges: the extractor finds the
// examples the issue named, and tells synopsis lines apart.
func TestExampleExtraction(t *testing.T) {
	if ex := fromText("help", "segchain prose line\n  segchain lab ls\n", false); len(ex) != 1 || ex[0].cmd != "segchain lab ls" {
		t.Errorf("help text: %+v", ex)
	}
	ex := fromText("x.md", "text\n```\nsegchain lab up   # comment\n$ segchain sid add fc00::1 End.DX6\nsegchain: End.DX6 requires nh6\nsegchain lab up [-f DOMAIN.yaml]\n```\nsegchain outside\n", true)
	if len(ex) != 3 || ex[0].cmd != "segchain lab up" || ex[1].wantErr != "End.DX6 requires nh6" || !isSynopsis(ex[2].cmd) || isSynopsis(ex[0].cmd) {
		t.Errorf("fromText: %+v", ex)
	}
}

// rewrite points an example at the test's labs: "default" (and the
// sc-default-* namespaces) become lab, "demo" becomes lab2, "fab" (a
// generated fabric) becomes fab: each group has its own, so two groups
// showing the same example (a --help text and its docs page) do not
// collide.
func rewrite(cmd, lab, lab2, fab string) string {
	return strings.NewReplacer(
		"--lab default", "--lab "+lab, "sc-default-", "sc-"+lab+"-",
		"--lab demo", "--lab "+lab2, "sc-demo-", "sc-"+lab2+"-",
		"--lab fab", "--lab "+fab, "sc-fab-", "sc-"+fab+"-",
	).Replace(cmd)
}

func skipReason(cmd string) string {
	for _, s := range skips {
		if strings.Contains(cmd, s.match) {
			return s.reason
		}
	}
	return ""
}

// TestPrivilegedDocExamples runs every example of the manual against a
// fresh lab per group (a --help text, README's "Using it", a docs/ page),
// in the order a reader meets them. Commands that act on "this node" run in
// the lab's nfv1 (nsenter --net: the mounts stay the host's).
func TestPrivilegedDocExamples(t *testing.T) {
	testutil.RequirePrivileged(t)
	for _, tool := range []string{"nsenter", "ip", "jq", "tcpdump"} {
		testutil.RequireTool(t, tool)
	}
	all := append(helpExamples(t), docExamples(t)...)
	work := t.TempDir()
	if err := os.Symlink(mustAbs(t, "../../examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	writeTraces(t, work)

	var groups []string
	byGroup := map[string][]example{}
	for _, e := range all {
		if _, ok := byGroup[e.group]; !ok {
			groups = append(groups, e.group)
		}
		byGroup[e.group] = append(byGroup[e.group], e)
	}
	var ran, failedAsShown, synopsis int
	skipped := map[string]int{}
	for _, g := range groups {
		exs := byGroup[g]
		var runnable []example
		for _, e := range exs {
			switch {
			case isSynopsis(e.cmd):
				synopsis++
			case skipReason(e.cmd) != "":
				skipped[skipReason(e.cmd)]++
			default:
				runnable = append(runnable, e)
			}
		}
		if len(runnable) == 0 {
			continue
		}
		t.Run(g, func(t *testing.T) {
			lab, lab2, fab := testutil.UniqueName("h14d"), testutil.UniqueName("h14e"), testutil.UniqueName("h14f")
			t.Cleanup(func() {
				for _, l := range []string{lab, lab2, fab} {
					run(context.Background(), work, lab, "", bin+" destroy --lab "+l+" >/dev/null 2>&1; "+bin+" lab down --lab "+l+" >/dev/null 2>&1")
				}
			})
			// The default lab with the default domain applied, unless the
			// group brings its labs up itself.
			if !createsLab(runnable, "") {
				if out, err := run(context.Background(), work, lab, "", bin+" lab up --lab "+lab+" && "+bin+" apply --lab "+lab); err != nil {
					t.Fatalf("lab up and apply: %v\n%s", err, out)
				}
			}
			if refersTo(runnable, "demo") && !createsLab(runnable, "demo") {
				if out, err := run(context.Background(), work, lab2, "", bin+" lab up --lab "+lab2); err != nil {
					t.Fatalf("lab up: %v\n%s", err, out)
				}
			}
			if sh, ok := setups[g]; ok {
				if out, err := run(context.Background(), work, lab, "sc-"+lab+"-nfv1", sh); err != nil {
					t.Fatalf("setup %q: %v\n%s", sh, err, out)
				}
			}
			for _, e := range runnable {
				cmd := rewrite(e.cmd, lab, lab2, fab)
				ns := ""
				if labExists(lab) {
					ns = "sc-" + lab + "-nfv1"
				}
				live := strings.Contains(cmd, "segchain dump") && strings.Contains(cmd, " -i ")
				// watch runs until interrupted: it must have made its
				// first apply by then.
				watch := strings.Contains(cmd, "segchain watch")
				timeout := 2 * time.Minute
				switch {
				case live:
					timeout = 3 * time.Second // a live capture runs until -c packets came: started is enough
				case watch:
					timeout = 20 * time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				var out string
				var err error
				watched := false
				if watch {
					out, watched = runUntil(ctx, work, lab, ns, cmd, func(out string) bool {
						return strings.Contains(out, "initial apply") || strings.Contains(out, `"result"`)
					})
				} else {
					out, err = run(ctx, work, lab, ns, cmd)
				}
				timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
				cancel()
				ran++
				switch {
				case live && timedOut:
				case watch && watched:
				case watch:
					t.Errorf("%s: %s\n  (ran as: %s)\n  watch made no initial apply within %v:\n%s", e.source, e.cmd, cmd, timeout, out)
				case e.wantErr != "":
					want := e.wantErr
					if len(want) > 40 {
						want = want[:40]
					}
					if err == nil || !strings.Contains(out, want) {
						t.Errorf("%s: %s\n  the manual shows the error %q; got %v:\n%s", e.source, e.cmd, e.wantErr, err, out)
					} else {
						failedAsShown++
					}
				case err != nil:
					t.Errorf("%s: %s\n  (ran as: %s)\n  %v:\n%s", e.source, e.cmd, cmd, err, out)
				}
			}
		})
	}
	var reasons []string
	total := 0
	for r, n := range skipped {
		reasons = append(reasons, fmt.Sprintf("%d: %s", n, r))
		total += n
	}
	sort.Strings(reasons)
	msg := fmt.Sprintf("doc examples: %d run (%d of them errors the manual shows), %d skipped [%s], %d synopsis lines",
		ran, failedAsShown, total, strings.Join(reasons, "; "), synopsis)
	t.Log(msg)
	fmt.Println(msg)
}

// createsLab reports whether one of exs brings up the lab named name ("":
// the default lab, as "segchain lab up" without --lab).
func createsLab(exs []example, name string) bool {
	for _, e := range exs {
		first, _, _ := strings.Cut(e.cmd, "&&")
		if !strings.HasPrefix(first, "segchain lab up") {
			continue
		}
		if name == "" && !strings.Contains(first, "--lab") || name != "" && strings.Contains(first, "--lab "+name) {
			return true
		}
	}
	return false
}

func refersTo(exs []example, name string) bool {
	for _, e := range exs {
		if strings.Contains(e.cmd, "--lab "+name) || strings.Contains(e.cmd, "sc-"+name+"-") {
			return true
		}
	}
	return false
}

func labExists(lab string) bool {
	_, err := os.Stat("/run/segchain/labs/" + lab + ".json")
	return err == nil
}

// run runs one shell command line with the binary under test first on PATH
// and the test's lab as the default lab, in namespace ns ("" = the test's).
func run(ctx context.Context, dir, lab, ns, line string) (string, error) {
	c := command(ctx, dir, lab, ns, line)
	out, err := c.CombinedOutput()
	if c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) // what it left in the background
	}
	return string(out), err
}

// runUntil runs a command line that runs until interrupted (segchain
// watch) and stops it as soon as its output satisfies enough (or at ctx's
// end); it reports whether enough was met.
func runUntil(ctx context.Context, dir, lab, ns, line string, enough func(string) bool) (string, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := command(ctx, dir, lab, ns, line)
	var buf lockedBuffer
	c.Stdout, c.Stderr = &buf, &buf
	if err := c.Start(); err != nil {
		return err.Error(), false
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	met := false
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !met {
		select {
		case <-tick.C:
			met = enough(buf.String())
		case <-done:
			return buf.String(), enough(buf.String())
		case <-ctx.Done():
			<-done
			return buf.String(), enough(buf.String())
		}
	}
	cancel()
	<-done
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	return buf.String(), true
}

// command is one shell command line with the binary under test first on
// PATH and the test's lab as the default lab, in namespace ns ("" = the
// test's).
func command(ctx context.Context, dir, lab, ns, line string) *exec.Cmd {
	args := []string{"sh", "-c", line}
	if ns != "" {
		args = append([]string{"nsenter", "--net=/run/netns/" + ns}, args...)
	}
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "SEGCHAIN_LAB="+lab)
	// The command line's children (a live `segchain dump`, `segchain
	// watch`) must not outlive it: at the deadline the whole process group
	// is killed, not only the shell.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	return c
}

// lockedBuffer collects a running command's output for a reader polling it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// smallDomain is S —eth0/eth0— R —eth1/eth0— D.
func smallDomain() *config.Domain {
	return &config.Domain{
		Name: "small",
		Nodes: map[string]*config.Node{
			"S": {Role: config.RoleHost, ID: 1},
			"R": {Role: config.RoleRouter, ID: 2, Locator: "fc00:2::/64"},
			"D": {Role: config.RoleHost, ID: 3},
		},
		Links: []*config.Link{
			{Endpoints: []string{"S:eth0", "R:eth0"}, IPv6: "fc00:12::/64", IPv4: "10.0.12.0/24"},
			{Endpoints: []string{"R:eth1", "D:eth0"}, IPv6: "fc00:23::/64"},
		},
	}
}

func runLab(t *testing.T, deps labDeps, args ...string) (string, error) {
	t.Helper()
	cmd := newLabCmdWith(deps)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestLabCLI(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	name := testutil.UniqueName("c-")
	t.Cleanup(func() {
		if err := lab.Down(name); err != nil && !errors.Is(err, lab.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	deps := labDeps{
		defaultDomain: func() (*config.Domain, error) { return smallDomain(), nil },
		loadDomain: func(string) (*config.Domain, error) {
			return nil, errors.New("no files in this test")
		},
	}

	out, err := runLab(t, deps, "up", "--lab", name, "-o", "json")
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	var l lab.Lab
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("lab up -o json: %v\n%s", err, out)
	}
	if got, want := l.Nodes["R"], lab.NetnsName(name, "R"); got != want {
		t.Errorf("lab up: R in %q, want %q", got, want)
	}

	t.Run("ls", func(t *testing.T) {
		out, err := runLab(t, deps, "ls", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var labs []lab.Listing
		if err := json.Unmarshal([]byte(out), &labs); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var mine *lab.Listing
		for i := range labs {
			if labs[i].Name == name {
				mine = &labs[i]
			}
		}
		if mine == nil {
			t.Fatalf("lab ls lacks %s:\n%s", name, out)
		}
		if len(mine.Nodes) != 3 || !mine.Complete {
			t.Errorf("lab ls: %+v, want 3 nodes, complete", *mine)
		}
		for _, n := range mine.Nodes {
			if !n.Exists {
				t.Errorf("lab ls: %s reported missing", n.Netns)
			}
		}
	})
	t.Run("exec", func(t *testing.T) {
		out, err := runLab(t, deps, "exec", "--lab", name, "S", "--", "ip", "-6", "addr", "show", "dev", "eth0")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "fc00:12::1/64") {
			t.Errorf("lab exec S ip addr: no fc00:12::1/64 in\n%s", out)
		}
		if _, err := runLab(t, deps, "exec", "--lab", name, "S", "ip", "addr"); err == nil {
			t.Error("lab exec without -- succeeded")
		}
		if _, err := runLab(t, deps, "exec", "--lab", name, "nope", "--", "true"); err == nil {
			t.Error("lab exec on an unknown node succeeded")
		}
	})
	t.Run("addr", func(t *testing.T) {
		out, err := runLab(t, deps, "addr", "--lab", name, "R", "-o", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var ifs []lab.Iface
		if err := json.Unmarshal([]byte(out), &ifs); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := map[string]bool{}
		for _, i := range ifs {
			for _, a := range i.Addrs {
				got[i.Name+" "+a.String()] = true
			}
		}
		for _, w := range []string{"eth0 fc00:12::2/64", "eth0 10.0.12.2/24", "eth1 fc00:23::2/64"} {
			if !got[w] {
				t.Errorf("lab addr R: missing %s in %v", w, got)
			}
		}
	})
	t.Run("up again refused", func(t *testing.T) {
		if _, err := runLab(t, deps, "up", "--lab", name); !errors.Is(err, lab.ErrExists) {
			t.Errorf("second lab up = %v, want ErrExists", err)
		}
	})

	// --name is the deprecated alias of --lab: it still works, and says so.
	if out, err := runLab(t, deps, "down", "--name", name); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	} else if !strings.Contains(out, "use --lab") {
		t.Errorf("lab down --name: no deprecation note:\n%s", out)
	}
	for _, ns := range l.Nodes {
		if nsutil.Exists(ns) {
			t.Errorf("%s survived lab down", ns)
		}
	}
}

// TestLabExecExitStatus runs `lab exec NODE -- sh -c SCRIPT` in a child
// copy of the test binary (lab exec ends the process with CMD's status) and
// checks that the status arrives, including death by a signal.
func TestLabExecExitStatus(t *testing.T) {
	if name := os.Getenv("SEGCHAIN_TEST_LAB_EXEC"); name != "" {
		script := os.Getenv("SEGCHAIN_TEST_LAB_SCRIPT")
		_, err := runLab(t, labDeps{}, "exec", "--lab", name, "S", "--", "sh", "-c", script)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lab exec:", err)
			os.Exit(99)
		}
		os.Exit(0) // what main does when the verb returns nil
	}
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	name := testutil.UniqueName("c-")
	t.Cleanup(func() {
		if err := lab.Down(name); err != nil && !errors.Is(err, lab.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	if _, err := lab.Up(lab.Topology{Name: name, Nodes: []lab.Node{{Name: "S"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		script string
		want   int
	}{{"exit 7", 7}, {"exit 0", 0}, {"kill -TERM $$", 128 + 15}} {
		t.Run(tt.script, func(t *testing.T) {
			c := exec.Command(os.Args[0], "-test.run=^TestLabExecExitStatus$")
			c.Env = append(os.Environ(), "SEGCHAIN_TEST_LAB_EXEC="+name, "SEGCHAIN_TEST_LAB_SCRIPT="+tt.script)
			out, err := c.CombinedOutput()
			got := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				got = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("exit status %d, want %d\n%s", got, tt.want, out)
			}
		})
	}
}

package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// readVerbs are the verbs that print state: each takes -o text|json.
var readVerbs = []string{
	"plan", "status", "destroy", "validate", "version",
	"lab up", "lab ls", "lab addr",
	"sid show", "fw list", "dump",
	"perf ls", "perf run", "perf limit",
}

func findCmd(t *testing.T, root *cobra.Command, path string) *cobra.Command {
	t.Helper()
	c, rest, err := root.Find(strings.Fields(path))
	if err != nil || len(rest) > 0 || c == root {
		t.Fatalf("no verb %q: %v", path, err)
	}
	return c
}

func TestEveryReadVerbTakesOutput(t *testing.T) {
	root := newRootCmd()
	for _, v := range readVerbs {
		c := findCmd(t, root, v)
		f := c.Flags().Lookup("output")
		if f == nil || f.Shorthand != "o" {
			t.Errorf("%s: no -o/--output", v)
			continue
		}
		if f.DefValue != "text" {
			t.Errorf("%s: -o defaults to %q, want text", v, f.DefValue)
		}
		for val, ok := range map[string]bool{"text": true, "json": true, "table": true, "yaml": false} {
			_ = c.Flags().Set("output", val)
			err := normalizeOutput(c, nil)
			if (err == nil) != ok {
				t.Errorf("%s -o %s: err %v", v, val, err)
			}
			if val == "table" && f.Value.String() != "text" {
				t.Errorf("%s -o table: became %q, want text", v, f.Value.String())
			}
		}
	}
}

// TestOutputCheckedThroughHooks: verbs whose parent has its own pre-run
// hook (sid, fw) still get -o checked.
func TestOutputCheckedThroughHooks(t *testing.T) {
	for _, args := range [][]string{{"sid", "show", "-o", "yaml"}, {"fw", "list", "-o", "yaml"}, {"validate", "-o", "yaml"}} {
		if _, err := runRoot(t, "", args...); err == nil || !strings.Contains(err.Error(), "want text or json") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	out, err := runRoot(t, "", "validate", "-o", "json")
	var v validation
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || !v.Valid || v.Nodes != 9 {
		t.Errorf("validate -o json: %v\n%s", err, out)
	}
	out, err = runRoot(t, "", "validate", "-f", "../../internal/config/testdata/bad/binding-loop.yaml", "-o", "json")
	if exitCode(err) != exitError {
		t.Errorf("invalid file: exit %d, want %d", exitCode(err), exitError)
	}
	if json.Unmarshal([]byte(out), &v) != nil || v.Valid || len(v.Errors) != 2 || v.Errors[0].Path != "services.bsa.segs" || v.Errors[0].Line == 0 {
		t.Errorf("invalid file -o json:\n%s", out)
	}
}

func TestVersion(t *testing.T) {
	out, err := runRoot(t, "", "version", "-o", "json", "--no-probe")
	var v versionInfo
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	if v.Go != runtime.Version() || v.Kernel == "" || v.Version == "" || v.Commit == "" {
		t.Errorf("version: %+v", v)
	}
	if out, err := runRoot(t, "", "--version"); err != nil || !strings.Contains(out, "kernel   "+v.Kernel) {
		t.Errorf("--version: %v\n%s", err, out)
	}
}

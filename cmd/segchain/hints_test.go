package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
)

// TestNewcomerHints: the mistakes of a first session get an answer that
// says what to type instead.
func TestNewcomerHints(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "nubwk"}, `segchain apply takes no arguments (got "nubwk"): name a domain file with -f nubwk or a lab with --lab nubwk`},
		{[]string{"status", "x.yaml", "-o", "json"}, "-f x.yaml"},
		{[]string{"aply", "--lab", "x"}, `unknown command "aply" for "segchain": did you mean "apply"?`},
		{[]string{"aply"}, `did you mean "apply"?`},
		{[]string{"lab", "upp", "--lab", "x"}, `unknown command "upp" for "segchain lab": did you mean "up"?`},
		{[]string{"lab", "upp"}, `did you mean "up"?`},
		{[]string{"perf", "rnu"}, `did you mean "run"?`},
		{[]string{"zzzzzz"}, `unknown command "zzzzzz" for "segchain" (segchain --help lists them)`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"status", "--interval", "1s"}, "--interval is for --watch"},
		{[]string{"status", "--watch", "--check"}, "--check and --watch: choose one"},
	} {
		_, err := runRoot(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("segchain %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Groups and the root still print their help without a word.
	for _, args := range [][]string{{}, {"lab"}, {"perf"}} {
		if out, err := runRoot(t, "", args...); err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("segchain %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestNoSuchLabSaysLabUp: a domain verb on a lab that is not up says how
// to bring it up, and which labs are up.
func TestNoSuchLabSaysLabUp(t *testing.T) {
	name := testutil.UniqueName("h6n")
	_, err := runRoot(t, "", "apply", "--lab", name)
	if err == nil || !errors.Is(err, lab.ErrNotFound) {
		t.Fatalf("apply --lab %s: %v, want no such lab", name, err)
	}
	for _, want := range []string{"segchain lab up --lab " + name, "up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("apply --lab %s: %v, want %q", name, err, want)
		}
	}
	if !strings.Contains(err.Error(), "labs up: ") && !strings.Contains(err.Error(), "no lab is up") {
		t.Errorf("apply --lab %s: %v, want the labs that are up", name, err)
	}
}

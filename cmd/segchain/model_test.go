package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
)

// upLab brings up a lab named h14-<random> from file ("" = the built-in
// default) and takes it down at the end of the test.
func upLab(t *testing.T, file string) string {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "ip")
	name := testutil.UniqueName("h14-")
	t.Cleanup(func() {
		if err := lab.Down(name); err != nil && !errors.Is(err, lab.ErrNotFound) {
			t.Errorf("cleanup: %v", err)
		}
	})
	args := []string{"lab", "up", "--lab", name}
	if file != "" {
		args = append(args, "-f", file)
	}
	if out, err := runRoot(t, "", args...); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	return name
}

func TestLabDomainFile(t *testing.T) {
	l := &lab.Lab{Name: "x", File: "/abs/bidirectional.yaml"}
	var note bytes.Buffer
	if got := labDomainFile(l, "", &note); got != l.File || note.Len() != 0 {
		t.Errorf("no -f: got %q (note %q), want the lab's file", got, note.String())
	}
	if got := labDomainFile(l, "/abs/bidirectional.yaml", &note); got != l.File || note.Len() != 0 {
		t.Errorf("same -f: got %q (note %q)", got, note.String())
	}
	if got := labDomainFile(l, "/abs/other.yaml", &note); got != "/abs/other.yaml" || !strings.Contains(note.String(), "brought up from /abs/bidirectional.yaml") {
		t.Errorf("other -f: got %q (note %q)", got, note.String())
	}
	note.Reset()
	if got := labDomainFile(&lab.Lab{Name: "d"}, "", &note); got != "" {
		t.Errorf("default lab: got %q, want the built-in domain", got)
	}
	if got := labDomainFile(nil, "f.yaml", &note); got != "f.yaml" || note.Len() != 0 {
		t.Errorf("no lab: got %q", got)
	}
}

// TestPrivilegedPlanUsesLabFile: a lab brought up from a file is planned
// from that file, not from the built-in default (whose nodes differ).
func TestPrivilegedPlanUsesLabFile(t *testing.T) {
	name := upLab(t, "../../examples/bidirectional.yaml")
	out, err := runRoot(t, "", "plan", "--lab", name)
	if err != nil {
		t.Fatalf("plan --lab %s: %v\n%s", name, err, out)
	}
	if !strings.Contains(out, "node edge2") {
		t.Errorf("plan does not show node edge2 of bidirectional.yaml:\n%s", out)
	}
}

package oam_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestPingSaysWhySIDsDoNotAnswer: an operator's first ping to a native
// SID gets no answer (Linux's seg6local drops it, as iputils' ping
// shows); segchain says why and what to add, and refuses --respond for a
// SID its responder cannot answer (an SR proxy's, served from tc) instead
// of timing out. traceroute to a SID that answers no echo names the last
// hop that did.
func TestPingSaysWhySIDsDoNotAnswer(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/default.yaml", Prefix: "s16ph", CLI: true, Binary: segchainBin})
	e.Must("apply", "--lab", e.Name)
	code := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	}
	out, err := e.Run("ping", "--lab", e.Name, "--from", "ingress", "-c", "2", "-i", "50ms", "nfv2-end")
	if code(err) != 2 || !strings.Contains(out, "is nfv2's End SID (nfv2-end), which answers no echo request by itself") || !strings.Contains(out, "--respond") {
		t.Errorf("ping to a native SID: exit %d, want 2 and why, with --respond:\n%s", code(err), out)
	}
	out, err = e.Run("ping", "--lab", e.Name, "--from", "ingress", "-c", "1", "--respond", "nfv2-end")
	if err != nil || !strings.Contains(out, "1 echo replies") {
		t.Errorf("ping --respond to a native SID: %v\n%s", err, out)
	}
	out, err = e.Run("ping", "--lab", e.Name, "--from", "ingress", "-c", "1", "--respond", "nfv1-fw")
	if code(err) != 1 || !strings.Contains(out, "End.AD SID nfv1-fw, served by segchain's tc program") {
		t.Errorf("ping --respond to an End.AD SID: exit %d, want 1 and why:\n%s", code(err), out)
	}
	// A node's address is answered by its kernel: no hint.
	out, err = e.Run("ping", "--lab", e.Name, "--from", "ingress", "-c", "1", "fc00:25::2")
	if err != nil || strings.Contains(out, "answers no echo") {
		t.Errorf("ping to nfv1's address: %v\n%s", err, out)
	}
	out, err = e.Run("traceroute", "--lab", e.Name, "--from", "ingress", "--max-hops", "5", "nfv1-end,nfv2-end,web egress")
	if code(err) != 2 || !strings.Contains(out, "is egress's End.DX6 SID (web egress)") || !strings.Contains(out, "the last hop that answered was 4 (nfv2)") {
		t.Errorf("traceroute to an End.DX6 SID: exit %d, want 2, why and the last hop that answered:\n%s", code(err), out)
	}
}

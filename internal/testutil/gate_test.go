package testutil

import (
	"os"
	"testing"
)

// RequirePrivileged lets a test run only as root (not told otherwise by
// Unprivileged) and without -short.
func TestRequirePrivileged(t *testing.T) {
	ran := false
	t.Run("gated", func(t *testing.T) {
		RequirePrivileged(t)
		ran = true
	})
	want := os.Geteuid() == 0 && os.Getenv(Unprivileged) == "" && !testing.Short()
	if ran != want {
		t.Errorf("gated test ran: %v, want %v (root %v, %s=%q, -short %v)", ran, want, os.Geteuid() == 0, Unprivileged, os.Getenv(Unprivileged), testing.Short())
	}
}

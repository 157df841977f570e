package boundary

import "testing"

func TestTrustSet(t *testing.T) {
	trust := trustSet([]string{"eth-r1", "s6svc*", "sc-svcloop"})
	for name, want := range map[string]bool{"eth-r1": true, "s6svc0": true, "s6svc12k": true, "sc-svcloop": true,
		"eth-r2": false, "s6sv": false, "sc-svcloop-in": false} {
		if got := trust(name); got != want {
			t.Errorf("trust(%q) = %v, want %v", name, got, want)
		}
	}
}

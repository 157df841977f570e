package dataplane

import (
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// checkProbe asks an oracle other than Probe whether the kernel has f and
// fails the test when the two disagree (a probe that wrongly says
// "unsupported" would otherwise skip the tests that need f).
func checkProbe(t *testing.T, f Feature) {
	t.Helper()
	var ok bool
	var evidence string
	switch f.Name {
	case "count":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End", "count")
	case "flavor psp":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End", "flavors", "psp")
	case "flavor next-csid":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End", "flavors", "next-csid")
	case "vrftable":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End.DT6", "vrftable", "100")
	case "End.DT4":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End.DT4", "vrftable", "100")
	case "End.DT46":
		ok, evidence = testutil.Seg6LocalAccepted(t, "End.DT46", "vrftable", "100")
	case "End.BPF":
		v := testutil.KernelConfig(t, "IPV6_SEG6_BPF")
		ok, evidence = v == "y", "CONFIG_IPV6_SEG6_BPF="+v
	case "seg6 hmac":
		v := testutil.KernelConfig(t, "IPV6_SEG6_HMAC")
		ok, evidence = v == "y", "CONFIG_IPV6_SEG6_HMAC="+v
	case "mode l2encap", "mode encap.red", "mode l2encap.red":
		ok, evidence = testutil.RouteAccepted(t, "encap", "seg6", "mode", f.Name[len("mode "):], "segs", "fc00::2,fc00::3")
	default:
		t.Fatalf("no oracle for feature %q: add one", f.Name)
	}
	if evidence == "" {
		evidence = "iproute2 installed it"
	}
	testutil.AgreeWithProbe(t, f.Name, f.Supported, ok, evidence)
}

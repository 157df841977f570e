package testutil

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Oracles for kernel features that do not go through segchain's own
// dataplane.Probe: a test that skips because the probe says "unsupported"
// asks one of these too and fails when they disagree, so a broken probe
// cannot turn tests into green skips.

// Seg6LocalAccepted reports whether iproute2 can install
// `ip -6 route add fc00::1/128 encap seg6local action ARGS... dev lo` in a
// throwaway namespace (removed before it returns), with iproute2's answer.
func Seg6LocalAccepted(t testing.TB, action ...string) (bool, string) {
	t.Helper()
	return RouteAccepted(t, append([]string{"encap", "seg6local", "action"}, action...)...)
}

// RouteAccepted reports whether iproute2 can install
// `ip -6 route add fc00::1/128 ARGS... dev lo` in a throwaway namespace
// (removed before it returns), with iproute2's answer.
func RouteAccepted(t testing.TB, route ...string) (bool, string) {
	t.Helper()
	ns := UniqueName("sct-orc-")
	if out, err := ExecErr("", "ip", "netns", "add", ns); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
	}
	defer func() {
		if out, err := ExecErr("", "ip", "netns", "del", ns); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	}()
	Exec(t, ns, "ip", "link", "set", "lo", "up")
	args := append([]string{"ip", "-6", "route", "add", "fc00::1/128"}, route...)
	out, err := ExecErr(ns, append(args, "dev", "lo")...)
	return err == nil, strings.TrimSpace(out)
}

// KernelConfig returns the running kernel's CONFIG_name value ("y", "m",
// or "" when not set) from /proc/config.gz; the test fails when the kernel
// does not publish its configuration.
func KernelConfig(t testing.TB, name string) string {
	t.Helper()
	v, err := kernelConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func kernelConfig(name string) (string, error) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return "", fmt.Errorf("kernel configuration: %w", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("kernel configuration: %w", err)
	}
	sc := bufio.NewScanner(z)
	prefix := "CONFIG_" + name + "="
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v, nil
		}
	}
	return "", sc.Err()
}

// AgreeWithProbe fails the test unless an outside oracle's answer
// (supported, with its evidence) matches segchain's probe for feature.
func AgreeWithProbe(t testing.TB, feature string, probe, oracle bool, evidence string) {
	t.Helper()
	if probe != oracle {
		t.Fatalf("segchain's probe says %s supported=%v, the kernel's own answer says %v (%s)", feature, probe, oracle, evidence)
	}
}

package agents

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/testutil"
)

// hmacDomain copies examples/hmac.yaml into a temporary directory with a
// fresh random secret of its own (printable, 48 bytes), so that the test
// can look for it anywhere it must not be.
func hmacDomain(t *testing.T) (file string, secret []byte) {
	t.Helper()
	src, err := os.ReadFile("../../examples/hmac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	secret = []byte(hex.EncodeToString(raw))
	if err := os.WriteFile(filepath.Join(dir, "secrets", "k1.key"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "hmac.yaml")
	if err := os.WriteFile(file, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, secret
}

// The HMAC domain applied through agents (issue 24 item 6: the secret
// never reached the agents, "0-byte secret"): every SR node holds the
// key with exactly the domain's secret, a re-apply changes nothing,
// signed traffic crosses the chain, and an SRv6 packet sent from inside
// the domain without an HMAC or with a forged one is still dropped at
// nfv1 (which requires HMAC) and never reaches the egress.
func TestPrivilegedAgentsHMAC(t *testing.T) {
	file, secret := hmacDomain(t)
	e := newEnvFile(t, true, "h2h-", file)
	out := e.Must("apply", "--lab", e.Name)
	if !strings.Contains(out, "applied") {
		t.Fatalf("apply: %s", out)
	}
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "the domain is already applied") {
		t.Fatalf("second apply changed something (a key whose secret the controller could not compare?):\n%s", out)
	}
	for _, n := range []string{"ingress", "nfv1", "egress"} {
		got, err := exec.Command("ip", "-n", e.NS(n), "sr", "hmac", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("ip sr hmac in %s: %v\n%s", n, err, got)
		}
		if !bytes.Contains(got, secret) || !strings.Contains(string(got), "1001") {
			t.Errorf("node %s: key 1001 with the domain's secret not installed:\n%s", n, got)
		}
	}

	// Signed traffic: the ingress signs, nfv1 and the egress verify.
	c := testutil.StartCapture(t, e.NS("nfv1"), "eth-ingress", "ip6 proto 43", 1)
	if r := e.stream(7100, 20, 50, nil); r.Unique != 20 {
		t.Errorf("signed chain: %d of 20 datagrams delivered (%+v)", r.Unique, r)
	}
	pcap := c.Wait(5 * time.Second)
	// 2 segments (hdr-len 4) + the 40-byte HMAC TLV (5): tshark does not
	// decode SRH TLVs.
	if pkts := testutil.Tshark(t, pcap, "ipv6.routing.len"); len(pkts) == 0 || pkts[0].First("ipv6.routing.len") != "9" {
		t.Errorf("routing header len = %v, want 9 (2 segments + HMAC TLV)", pkts)
	}

	end, dx6 := e.sidOf("nfv1", "End"), e.sidOf("egress", "End.DX6")
	dropped := func() float64 {
		return e.metricSum("nfv1", "segchain_sid_errors_total", `node="nfv1"`) +
			e.metricSum("nfv1", "segchain_boundary_drops_total", `reason="hmac-`)
	}
	for _, tc := range []struct{ name, tlv string }{
		{"no HMAC TLV", ""},
		{"forged HMAC", `, tlv_objects=[SRHHMAC(keyid=1001, hmac=b"\x01"*32)]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, dxBefore := dropped(), e.sidPackets("egress", dx6)
			testutil.RunScapyIn(t, e.NS("ingress"), fmt.Sprintf(`
srh = IPv6ExtHdrSegmentRouting(addresses=["%s", "%s"], segleft=1, lastentry=1%s)
p = IPv6(src="fc00:1::1", dst="%s")/srh/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7199)
send(p, count=3, verbose=0)
`, dx6, end, tc.tlv, end))
			if !waitFor(10*time.Second, func() bool { return dropped()-before >= 3 }) {
				t.Errorf("nfv1 counted %v drops for 3 %s packets, want 3", dropped()-before, tc.name)
			}
			if got := e.sidPackets("egress", dx6); got != dxBefore {
				t.Errorf("a %s packet reached the egress End.DX6 (%v -> %v)", tc.name, dxBefore, got)
			}
		})
	}
}

// The secret of an HMAC key applied through agents is nowhere but in the
// kernels and in the agents' intent files (mode 0600, for --reconcile):
// not in apply's or plan's output, not in status or its JSON, not in an
// agent's log or journal, not in the lab's files.
func TestPrivilegedAgentsHMACSecretNotLeaked(t *testing.T) {
	file, secret := hmacDomain(t)
	e := newEnvFile(t, true, "h2s-", file)
	forms := map[string]string{
		"raw":    string(secret),
		"base64": base64.StdEncoding.EncodeToString(secret),
		"hex":    hex.EncodeToString(secret),
	}
	check := func(where, text string) {
		t.Helper()
		for f, s := range forms {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret (%s)", where, f)
			}
		}
	}
	check("apply", e.Must("apply", "--lab", e.Name))
	check("apply -o json", e.Must("apply", "--lab", e.Name, "-o", "json"))
	check("plan", e.Must("plan", "--lab", e.Name))
	check("plan -o json", e.Must("plan", "--lab", e.Name, "-o", "json"))
	check("status", e.Must("status", "--lab", e.Name))
	check("status -o json", e.Must("status", "--lab", e.Name, "-o", "json"))
	// A rotation: the key set again with a new secret (neither shown).
	rotated := []byte(hex.EncodeToString(secret[:16]) + "-rotated")
	forms["rotated"] = string(rotated)
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "secrets", "k1.key"), rotated, 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.Must("apply", "--lab", e.Name)
	if !strings.Contains(out, "~ hmac 1001") {
		t.Errorf("the rotation is not a key change:\n%s", out)
	}
	check("a rotation's apply", out)
	if !strings.Contains(out, "applied") || strings.Contains(e.Must("apply", "--lab", e.Name), "~ hmac") {
		t.Errorf("rotation not applied, or not converged")
	}
	if got, _ := exec.Command("ip", "-n", e.NS("nfv1"), "sr", "hmac", "show").CombinedOutput(); !bytes.Contains(got, rotated) {
		t.Errorf("nfv1 does not hold the rotated secret:\n%s", got)
	}
	agentDir := filepath.Join("/run/segchain/labs", e.Name+".agents")
	n := 0
	err := filepath.Walk(agentDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if fi.Name() == reconcile.File {
			// The intent keeps the secret, for --reconcile: the agent's
			// alone.
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: mode %o, want 600", p, m)
			}
			return nil
		}
		n++
		check(p, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no agent file under %s", agentDir)
	}
	in := e.intent("nfv1")
	if len(in.Want.HMACKeys) != 1 {
		t.Errorf("nfv1's intent has keys %v, want key 1001", in.Want.HMACKeys)
	}
	b, _ := os.ReadFile(filepath.Join(agentDir, "state", "nfv1", reconcile.File))
	if !strings.Contains(string(b), base64.StdEncoding.EncodeToString(rotated)) {
		t.Errorf("nfv1's intent does not keep the key's secret (reconcile could not re-install it):\n%s", b)
	}
}

// sidOf is the address of node's first SID of behaviour beh (status -o json).
func (e *env) sidOf(node, beh string) string {
	e.T.Helper()
	for _, n := range e.status()["nodes"].([]any) {
		m := n.(map[string]any)
		if m["node"] != node {
			continue
		}
		sids, _ := m["sids"].([]any)
		for _, s := range sids {
			s := s.(map[string]any)
			if s["behavior"] == beh {
				return strings.TrimSuffix(s["sid"].(string), "/112")
			}
		}
	}
	e.T.Fatalf("node %s has no %s SID", node, beh)
	return ""
}

// sidPackets is the packets counter of node's SID sid (status -o json).
func (e *env) sidPackets(node, sid string) float64 {
	e.T.Helper()
	for _, n := range e.status()["nodes"].([]any) {
		m := n.(map[string]any)
		sids, _ := m["sids"].([]any)
		for _, s := range sids {
			s := s.(map[string]any)
			if m["node"] == node && strings.HasPrefix(s["sid"].(string), sid+"/") {
				return s["packets"].(float64)
			}
		}
	}
	e.T.Fatalf("node %s has no SID %s", node, sid)
	return 0
}

var sampleRE = regexp.MustCompile(`^([a-z_]+)\{(.*)\} (\S+)$`)

// metricSum sums node's agent samples of metric whose labels contain sub.
func (e *env) metricSum(node, metric, sub string) float64 {
	e.T.Helper()
	sum := 0.0
	for _, l := range strings.Split(e.scrape(node), "\n") {
		m := sampleRE.FindStringSubmatch(l)
		if m == nil || m[1] != metric || !strings.Contains(m[2], sub) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			e.T.Fatalf("metric %q: %v", l, err)
		}
		sum += v
	}
	return sum
}

// Package fuzz holds the SR domain boundary's fuzz regression tests (issue
// 24): the corpus of frames that once got through the boundary, replayed
// against labs of the example domains (each must be dropped and counted),
// and a CI-sized run of scripts/fuzz-boundary.py. Labs are brought up with
// the segchain binary, as an operator does, under unique names.
package fuzz

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// segchainBin is the binary under test, built once by TestMain (or taken
// from $SEGCHAIN_BIN).
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

// lab is a lab brought up with `segchain lab up` and applied.
type lab struct {
	name  string
	ns    map[string]string
	links []link
}

type link struct{ a, aif, b, bif string }

// domainFile returns the file of a corpus domain name: an example, or an
// example with one edit (written to a temporary directory).
func domainFile(t *testing.T, domain string) string {
	t.Helper()
	switch domain {
	case "default":
		return "../../examples/default.yaml"
	case "hmac":
		return "../../examples/hmac.yaml"
	case "default+sf1-boundary":
		return edited(t, "../../examples/default.yaml", func(s string) string {
			return s + "\nsecurity:\n  boundary:\n    interfaces: [\"nfv1:eth-sf1\"]\n"
		})
	case "default+nfv1-end-external":
		return edited(t, "../../examples/default.yaml", func(s string) string {
			return strings.Replace(s, "nfv1-end: {node: nfv1, behavior: End}", "nfv1-end: {node: nfv1, behavior: End, external: true}", 1)
		})
	}
	t.Fatalf("unknown corpus domain %q", domain)
	return ""
}

func edited(t *testing.T, file string, edit func(string) string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := edit(string(raw))
	if out == string(raw) {
		t.Fatalf("%s: the edit changed nothing", file)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// labUp brings up and applies a lab of the domain file under a unique name
// (labenv: taken down when the test ends, even on failure, and checked for
// leftovers).
func labUp(t *testing.T, file string) *lab {
	t.Helper()
	e := labenv.New(t, labenv.Options{File: file, Prefix: "fz", CLI: true, Binary: segchainBin})
	name := e.Name
	e.Must("apply", "--lab", name)
	raw, err := os.ReadFile("/run/segchain/labs/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Nodes map[string]string `json:"nodes"`
		Links []struct{ A, B string }
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	l := &lab{name: name, ns: st.Nodes}
	for _, k := range st.Links {
		a, aif, _ := strings.Cut(k.A, ":")
		b, bif, _ := strings.Cut(k.B, ":")
		l.links = append(l.links, link{a, aif, b, bif})
	}
	return l
}

// peer is the node and interface at the other end of node's iface (iface
// "" when node has one link).
func (l *lab) peer(t *testing.T, node, iface string) (string, string, string) {
	t.Helper()
	var out [][3]string
	for _, k := range l.links {
		if k.a == node && (iface == "" || k.aif == iface) {
			out = append(out, [3]string{k.aif, k.b, k.bif})
		}
		if k.b == node && (iface == "" || k.bif == iface) {
			out = append(out, [3]string{k.bif, k.a, k.aif})
		}
	}
	if len(out) != 1 {
		t.Fatalf("%s:%s: %d links, want one (name the interface)", node, iface, len(out))
	}
	return out[0][0], out[0][1], out[0][2]
}

func (l *lab) mac(t *testing.T, node, iface string) net.HardwareAddr {
	t.Helper()
	out := testutil.Exec(t, "", "ip", "-n", l.ns[node], "-j", "link", "show", "dev", iface)
	var ls []struct{ Address string }
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip link %s %s: %v %s", node, iface, err, out)
	}
	return testutil.MustMAC(ls[0].Address)
}

// counted is what segchain counts as dropped on every node: the boundary's
// drops (every node, interface, direction and reason, the HMAC
// classifier's included) plus the SIDs' errors (where the kernel drops a
// packet a SID refused, e.g. a wrong HMAC digest).
func (l *lab) counted(t *testing.T) uint64 {
	t.Helper()
	var st struct {
		Nodes []struct {
			Node     string
			Boundary []struct{ Packets uint64 }
			SIDs     []struct{ Errors uint64 } `json:"sids"`
		}
	}
	runJSON(t, &st, "status", "--lab", l.name, "-o", "json")
	var n uint64
	for _, nd := range st.Nodes {
		for _, c := range nd.Boundary {
			n += c.Packets
		}
		for _, s := range nd.SIDs {
			n += s.Errors
		}
	}
	return n
}

func (c corpusFrame) String() string { return fmt.Sprintf("%s (%s)", c.name, c.what) }

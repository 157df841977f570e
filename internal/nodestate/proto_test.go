package nodestate_test

import (
	"bufio"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// segchainProtos are the rtnetlink protocols segchain stamps now.
func segchainProtos() map[string]int {
	return map[string]int{
		"Proto":                 nodestate.Proto,
		"ProtoManual":           nodestate.ProtoManual,
		"ProtoNFLoop":           nodestate.ProtoNFLoop,
		"ProtoBGP":              nodestate.ProtoBGP,
		"srv6svc.RouteProtocol": srv6svc.RouteProtocol,
	}
}

// Every route segchain installs is told apart by its rtnetlink protocol:
// two components sharing one would see each other's routes as drift.
func TestRouteProtocolsDistinct(t *testing.T) {
	protos := segchainProtos()
	protos["ProtoLegacy"] = nodestate.ProtoLegacy
	protos["ProtoManualLegacy"] = nodestate.ProtoManualLegacy
	seen := map[int]string{}
	for name, p := range protos {
		if o, dup := seen[p]; dup {
			t.Errorf("%s and %s share rtnetlink protocol %d", name, o, p)
		}
		seen[p] = name
	}
}

// Numbers others own. FRR's zebra takes the routes of its numbers found in
// the kernel for its own daemons' (zebra/rt_netlink.h: RTPROT_ZEBRA 11,
// RTPROT_BABEL 42, 186-198; FRR 8.4.4 copies a protocol-197 route as an
// OpenFabric route, docs/apply.md); the kernel's UAPI names RTPROT_* 0-18,
// 42, 84 (OVN), 99, 186-189 and 192.
var (
	frrProtos    = rangeOf(186, 198, 11, 42)
	kernelProtos = rangeOf(0, 18, 42, 84, 99, 186, 187, 188, 189, 192)
)

func rangeOf(lo, hi int, more ...int) map[int]bool {
	m := map[int]bool{}
	for p := lo; p <= hi; p++ {
		m[p] = true
	}
	for _, p := range more {
		m[p] = true
	}
	return m
}

// segchain's protocols are named by nobody: not FRR, not the kernel, not
// iproute2's tables on this host (rt_protos and rt_protos.d, both the /etc
// and the /usr/share copies newer iproute2 reads), not the kernel headers
// installed here. A number someone names is one a routing daemon may take
// for its own, and one `ip route` shows under a foreign name.
func TestRouteProtocolsUnnamed(t *testing.T) {
	named := map[int]string{}
	for p := range frrProtos {
		named[p] = "FRR's zebra (zebra/rt_netlink.h)"
	}
	for p := range kernelProtos {
		named[p] = "the kernel (include/uapi/linux/rtnetlink.h)"
	}
	var files []string
	for _, dir := range []string{"/etc/iproute2", "/usr/share/iproute2", "/usr/lib/iproute2"} {
		files = append(files, filepath.Join(dir, "rt_protos"))
		more, _ := filepath.Glob(filepath.Join(dir, "rt_protos.d", "*.conf"))
		files = append(files, more...)
	}
	read := 0
	for _, f := range files {
		m, err := readRtProtos(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		read++
		for p, name := range m {
			named[p] = f + " (" + name + ")"
		}
	}
	if m, err := readUAPI("/usr/include/linux/rtnetlink.h"); err == nil {
		for p, name := range m {
			named[p] = "/usr/include/linux/rtnetlink.h (" + name + ")"
		}
	}
	t.Logf("checked against FRR, the kernel's RTPROT_* and %d iproute2 file(s)", read)
	for name, p := range segchainProtos() {
		if who, ok := named[p]; ok {
			t.Errorf("%s = %d is named by %s", name, p, who)
		}
	}
	// The legacy numbers are FRR's: the reason they were left.
	for _, p := range []int{nodestate.ProtoLegacy, nodestate.ProtoManualLegacy} {
		if !frrProtos[p] {
			t.Errorf("legacy protocol %d is not FRR's: why was it moved?", p)
		}
	}
}

// readRtProtos parses an iproute2 rt_protos file: "NUMBER NAME" lines,
// # comments.
func readRtProtos(path string) (map[int]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		n, err := strconv.ParseInt(fs[0], 0, 32)
		if err != nil {
			continue
		}
		out[int(n)] = fs[1]
	}
	return out, sc.Err()
}

var rtprotRe = regexp.MustCompile(`(?m)^#define\s+(RTPROT_\w+)\s+(\d+)`)

func readUAPI(path string) (map[int]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, m := range rtprotRe.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		out[n] = m[1]
	}
	return out, nil
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		proto int
		want  string
	}{
		{nodestate.Proto, "domain"}, {nodestate.ProtoLegacy, "domain"},
		{nodestate.ProtoManual, "hand-made"}, {nodestate.ProtoManualLegacy, "hand-made"},
		{nodestate.ProtoBGP, ""}, {4, ""},
	} {
		if got := nodestate.Origin(tc.proto); got != tc.want {
			t.Errorf("Origin(%d) = %q, want %q", tc.proto, got, tc.want)
		}
	}
}

// A renumbering is a change (String) made in place (same Key).
func TestProtoInStringNotKey(t *testing.T) {
	r := nodestate.Route{Dst: netip.MustParsePrefix("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	old := r
	old.Proto = nodestate.ProtoLegacy
	if r.Key() != old.Key() {
		t.Errorf("Key differs: %q vs %q", r.Key(), old.Key())
	}
	if r.String() == old.String() {
		t.Errorf("String equal: %q", r.String())
	}
	if got := old.Protocol(); got != nodestate.ProtoLegacy {
		t.Errorf("Protocol() = %d, want %d", got, nodestate.ProtoLegacy)
	}
	if got := r.Protocol(); got != nodestate.Proto {
		t.Errorf("Protocol() = %d, want %d", got, nodestate.Proto)
	}
	ru := nodestate.Rule{Family: 6, Priority: 100, Table: 100}
	oru := ru
	oru.Proto = nodestate.ProtoLegacy
	if ru.Key() == oru.Key() || !strings.HasSuffix(oru.String(), " proto 197") {
		t.Errorf("rule keys %q, %q", ru.Key(), oru.Key())
	}
}

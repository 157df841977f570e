package ids

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
)

// The differential test's inputs: the rules, their variables, and where
// the corpus generator and the documented differences live.
const (
	diffRules  = "testdata/suricata/corpus.rules"
	diffCorpus = "../../scripts/ids-corpus.py"
	diffDoc    = "../../docs/ids.md"
)

var diffVars = map[string]string{
	"HOME_NET":     "[10.1.0.0/16]",
	"EXTERNAL_NET": "!$HOME_NET",
	"HTTP_PORTS":   "[80,8080]",
	"DMZ":          "[10.1.8.0/24,2001:db8:1::/48]",
}

// diffKey is one difference: a rule that fired on one side only.
type diffKey struct {
	sid  uint32
	side string // "segchain only" or "Suricata only"
}

// TestSuricataDifferential runs Suricata 7 and the engine over the same
// stateless corpus (scripts/ids-corpus.py: Suricata reads the plain
// packets, the engine the SRv6-encapsulated copies, as the IDS sees them)
// and compares the alerts per (packet, rule). It fails when the agreement
// falls below the floor docs/ids.md states, or when a rule differs more
// often, or on another side, than the table of documented differences
// says. Suricata is the oracle: a machine without it fails (make deps
// installs it) rather than skipping.
func TestSuricataDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Suricata over a generated corpus: skipped with -short (make test runs it)")
	}
	sur, err := exec.LookPath("suricata")
	if err != nil {
		t.Fatal("suricata is not installed: make deps installs Suricata 7, this test's oracle")
	}
	if v, err := exec.Command(sur, "-V").Output(); err != nil || !strings.Contains(string(v), "version 7.") {
		t.Fatalf("this test compares with Suricata 7 (make deps installs it from bookworm-backports); suricata -V: %q %v", v, err)
	}
	if err := exec.Command("python3", "-c", "import scapy.all").Run(); err != nil {
		t.Fatal("python3 scapy is needed to generate the corpus (make deps installs it)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("python3", diffCorpus, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", diffCorpus, err, out)
	}
	want := runSuricata(t, sur, filepath.Join(dir, "plain.pcap"), filepath.Join(dir, "suricata"))
	got, npkts := runEngine(t, filepath.Join(dir, "srv6.pcap"))

	rules, err := ParseFile(diffRules, diffVars)
	if err != nil {
		t.Fatal(err)
	}
	both := 0
	diffs := map[diffKey][]int{}
	for pkt := 1; pkt <= npkts; pkt++ {
		for _, r := range rules {
			s, g := want[pkt][r.SID], got[pkt][r.SID]
			switch {
			case s && g:
				both++
			case s:
				k := diffKey{r.SID, "Suricata only"}
				diffs[k] = append(diffs[k], pkt)
			case g:
				k := diffKey{r.SID, "segchain only"}
				diffs[k] = append(diffs[k], pkt)
			}
		}
	}
	onlyS, onlyG := 0, 0
	for k, pkts := range diffs {
		if k.side == "Suricata only" {
			onlyS += len(pkts)
		} else {
			onlyG += len(pkts)
		}
	}
	agreement := float64(both) / float64(both+onlyS+onlyG)
	t.Logf("%d packets, %d rules: %d alerts in both, %d Suricata only, %d segchain only: agreement %.2f %%",
		npkts, len(rules), both, onlyS, onlyG, 100*agreement)
	if both < 500 {
		t.Errorf("only %d alerts in common: the corpus no longer exercises the rules", both)
	}

	floor, documented := readDocumentedDifferences(t)
	if 100*agreement < floor {
		t.Errorf("agreement %.2f %% is below the %.2f %% docs/ids.md states", 100*agreement, floor)
	}
	keys := make([]diffKey, 0, len(diffs))
	for k := range diffs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].sid < keys[j].sid })
	for _, k := range keys {
		pkts := diffs[k]
		n, ok := documented[k]
		switch {
		case !ok:
			t.Errorf("sid %d fires on %s on %d packets (e.g. packet %d of plain.pcap), a difference docs/ids.md does not document",
				k.sid, k.side, len(pkts), pkts[0])
		case len(pkts) > n:
			t.Errorf("sid %d: %s on %d packets, docs/ids.md documents %d (packets %v)", k.sid, k.side, len(pkts), n, pkts)
		default:
			t.Logf("sid %d: %s on %d packets (documented: %d), packets %v", k.sid, k.side, len(pkts), n, pkts)
		}
	}
	if t.Failed() {
		if keep := os.Getenv("IDS_DIFF_KEEP"); keep != "" {
			_ = os.CopyFS(keep, os.DirFS(dir))
			t.Logf("corpus and Suricata's output copied to %s", keep)
		} else {
			t.Log("IDS_DIFF_KEEP=DIR keeps the corpus and Suricata's output")
		}
	}
}

// runSuricata runs Suricata offline over the plain capture and returns,
// per packet (1-based, pcap_cnt), the sids that alerted.
func runSuricata(t *testing.T, sur, pcap, logdir string) map[int]map[uint32]bool {
	t.Helper()
	if err := os.MkdirAll(logdir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-r", pcap, "-S", diffRules, "-l", logdir, "-k", "none", "--runmode", "single",
		"--set", "packet-alert-max=1000"}
	names := make([]string, 0, len(diffVars))
	for n := range diffVars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		group := "address-groups"
		if strings.HasSuffix(n, "_PORTS") {
			group = "port-groups"
		}
		args = append(args, "--set", fmt.Sprintf("vars.%s.%s=%s", group, n, diffVars[n]))
	}
	out, err := exec.Command(sur, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("suricata %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// Every rule must load: a rule Suricata refuses would silently agree
	// with nothing.
	if m := regexp.MustCompile(`(?m)^E: .*`).FindAll(out, -1); len(m) > 0 {
		t.Fatalf("suricata reported errors:\n%s", out)
	}
	f, err := os.Open(filepath.Join(logdir, "eve.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	alerts := map[int]map[uint32]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			EventType string `json:"event_type"`
			PcapCnt   int    `json:"pcap_cnt"`
			Alert     struct {
				SID uint32 `json:"signature_id"`
			} `json:"alert"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("eve.json: %v", err)
		}
		if ev.EventType != "alert" {
			continue
		}
		if alerts[ev.PcapCnt] == nil {
			alerts[ev.PcapCnt] = map[uint32]bool{}
		}
		alerts[ev.PcapCnt][ev.Alert.SID] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return alerts
}

// runEngine runs the engine over the SRv6 capture (packets start at the
// outer IPv6 header) and returns the sids that fired per packet (1-based)
// and the number of packets.
func runEngine(t *testing.T, pcap string) (map[int]map[uint32]bool, int) {
	t.Helper()
	rules, err := ParseFile(diffRules, diffVars)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := New(rules, Options{Mode: ModeIDS})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[int]map[uint32]bool{}
	n := 0
	var p Packet
	var fired []*Rule
	for {
		data, _, err := rd.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if err := FromWire(data, &p, 16); err != nil {
			t.Fatalf("packet %d: %v", n, err)
		}
		if p.Segments == nil {
			t.Fatalf("packet %d: no SRH: the engine must see the encapsulated copy", n)
		}
		_, fired = eng.Match(&p, fired[:0])
		for _, r := range fired {
			if alerts[n] == nil {
				alerts[n] = map[uint32]bool{}
			}
			alerts[n][r.SID] = true
		}
	}
	if st := eng.Stats(); st.Undecodable > 0 {
		t.Fatalf("%d packets undecodable: %v", st.Undecodable, st.UndecodableBy)
	}
	return alerts, n
}

// readDocumentedDifferences reads, from docs/ids.md's section "Agreement
// with Suricata", the agreement floor ("floor: **N %**") and the table of
// differences (| sid | side | packets | why |).
func readDocumentedDifferences(t *testing.T) (float64, map[diffKey]int) {
	t.Helper()
	b, err := os.ReadFile(diffDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Agreement with Suricata")
	if start < 0 {
		t.Errorf("%s: no section \"Agreement with Suricata\"", diffDoc)
		return 100, nil
	}
	sec := doc[start+1:]
	if end := strings.Index(sec[2:], "\n## "); end >= 0 {
		sec = sec[:end+2]
	}
	m := regexp.MustCompile(`floor: \*\*([0-9.]+) %\*\*`).FindStringSubmatch(sec)
	if m == nil {
		t.Errorf("%s: the section states no agreement floor (\"floor: **N %%**\")", diffDoc)
		return 100, nil
	}
	floor, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[diffKey]int{}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (segchain only|Suricata only) \| (\d+) \|`)
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		sid, _ := strconv.ParseUint(m[1], 10, 32)
		n, _ := strconv.Atoi(m[3])
		documented[diffKey{uint32(sid), m[2]}] += n
	}
	return floor, documented
}

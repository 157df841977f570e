package oam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// keptDomain is the default example with web's OAM kept by apply:
// sampling 1 in rate and the echo responder on its SIDs' nodes.
func keptDomain(t *testing.T, rate int) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const egress = `    services: [nfv1-end, nfv2-end]
    egress: {node: egress, behavior: End.DX6, nh6: "fc00:4d::d"}
`
	s := string(b)
	if strings.Count(s, egress) != 1 {
		t.Fatalf("examples/default.yaml: web's services and egress not found once")
	}
	s = strings.Replace(s, egress, egress+fmt.Sprintf("    oam: {sample: %d, respond: true}\n", rate), 1)
	p := filepath.Join(t.TempDir(), "kept.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// keptStatus runs segchain status -o json and returns web's sampling.
func keptStatus(t *testing.T, e *labenv.Env) oam.KeptChain {
	t.Helper()
	return keptStatusOf(t, e, "web")
}

// keptStatusOf is keptStatus for chain.
func keptStatusOf(t *testing.T, e *labenv.Env, chain string) oam.KeptChain {
	t.Helper()
	out, err := e.Run("status", "--lab", e.Name, "-o", "json")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st struct {
		Sampling []oam.KeptChain `json:"sampling"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndexByte(out, '}')+1]), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st.Sampling) != 1 || st.Sampling[0].Chain != chain {
		t.Fatalf("status sampling %+v, want %s's", st.Sampling, chain)
	}
	return st.Sampling[0]
}

// checkKept says what is wrong with web's kept sampling after count
// packets at 1 in rate: the marker's counts, and every hop's paired
// packets within 1 % of the stream's 1 in rate, none incomplete.
func checkKept(kc oam.KeptChain, count, rate int) []string {
	var bad []string
	want := float64(count / rate)
	if kc.Packets != uint64(count) || kc.Marked != uint64(count/rate) {
		bad = append(bad, fmt.Sprintf("counted %d, marked %d: want %d, %d", kc.Packets, kc.Marked, count, count/rate))
	}
	if kc.Incomplete != 0 || len(kc.Problems) != 0 {
		bad = append(bad, fmt.Sprintf("%d incomplete, problems %v: want none", kc.Incomplete, kc.Problems))
	}
	var hops []string
	for i, h := range kc.Hops {
		hops = append(hops, h.Kind+":"+h.Node)
		if math.Abs(float64(h.Packets)-want) > 0.01*want {
			bad = append(bad, fmt.Sprintf("hop %d %s: %d packets, want %v", i, h.Node, h.Packets, want))
		}
		if i > 0 && (h.StepUS == nil || h.AtUS == nil || h.StepUS.P50 <= 0 || h.AtUS.P99 < h.StepUS.P50) {
			bad = append(bad, fmt.Sprintf("hop %d %s: latency %+v %+v", i, h.Node, h.StepUS, h.AtUS))
		}
	}
	if got := strings.Join(hops, " "); got != "headend:ingress sid:nfv1 sid:nfv2 egress:egress" {
		bad = append(bad, "hops "+got)
	}
	return bad
}

// chains[].oam kept by apply through the agents (lab up --agents): the
// headend's agent marks 1 in 100 of web's packets, the segments' agents
// timestamp them; a real Prometheus scraping the agents reads the marker's
// counts and each node's arrivals, segchain status pairs the sightings
// into per-hop latencies — all within 1 % of the stream's 1 in 100, none
// incomplete, nothing lost. With one node's tap gone (its agent handed an
// empty set), the check fails. The responder kept on the SIDs' nodes
// answers iputils' ping to a native SID; destroy removes it.
func TestKeptOAMThroughAgents(t *testing.T) {
	testutil.RequireTool(t, "prometheus")
	testutil.RequireTool(t, "ping")
	const count, rate = 3000, 100
	e := labenv.New(t, labenv.Options{File: keptDomain(t, rate), Prefix: "oamk-", CLI: true, Binary: segchainBin, Agents: true})
	e.Must("apply", "--lab", e.Name)
	var targets []string
	for _, n := range []string{"ingress", "nfv1", "nfv2", "egress"} {
		targets = append(targets, e.Lab.Agents[n].Metrics)
	}
	// The per-hop histograms: segchain trace --metrics-listen, no
	// --sample, pairs the agents' sightings as they come.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	exporter := l.Addr().String()
	l.Close()
	var expOut strings.Builder
	exp := exec.Command(segchainBin, "trace", "--lab", e.Name, "--metrics-listen", exporter, "web")
	exp.Stdout, exp.Stderr = &expOut, &expOut
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exp.Process.Signal(os.Interrupt)
		exp.Wait()
		t.Logf("segchain trace --metrics-listen:\n%s", expOut.String())
	})
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(expOut.String(), "exporting web"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || exp.ProcessState != nil {
			t.Fatalf("the exporter did not start:\n%s", expOut.String())
		}
	}
	prom := testutil.StartPrometheus(t, "segchain-agents", append(targets, exporter)...)

	chainStream(t, e, 7000, count, 1000, nil)
	want := float64(count / rate)
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; {
		arr, raw, err := prom.Query(`sum by (node) (segchain_sample_node_arrivals_total{chain="web"})`)
		last = raw
		pk, _, _ := prom.Query(`segchain_sample_node_packets_total{chain="web"}`, "chain")
		mk, _, _ := prom.Query(`segchain_sample_node_marked_total{chain="web"}`, "chain")
		hops, _, herr := prom.Query(`sum by (hop, node) (segchain_sample_hop_step_seconds_count{chain="web"})`)
		ok := err == nil && herr == nil && len(arr) == 3 && len(hops) == 3 && pk["node=ingress"] == count && mk["node=ingress"] == want
		for _, v := range arr {
			ok = ok && math.Abs(v-want) <= 0.01*want
		}
		for _, v := range hops {
			ok = ok && math.Abs(v-want) <= 0.01*want
		}
		if ok {
			inc, _, _ := prom.Query(`segchain_sample_incomplete_total{chain="web"}`, "chain")
			if inc[""] != 0 {
				t.Errorf("exporter: %v incomplete, want 0", inc)
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: arrivals %v, hop histograms %v, packets %v, marked %v; want 3 nodes and 3 hops × %v of %d packets\nlast answer %s\nexporter: %s", arr, hops, pk, mk, want, count, last, expOut.String())
		}
		time.Sleep(500 * time.Millisecond)
	}

	kc := keptStatus(t, e)
	if bad := checkKept(kc, count, rate); len(bad) > 0 {
		t.Fatalf("status: %s\n%+v", strings.Join(bad, "; "), kc)
	}
	out := e.Must("status", "--lab", e.Name)
	if i := strings.Index(out, "sampling ("); i >= 0 {
		t.Logf("status:\n%s", out[i:])
	}
	if !strings.Contains(out, "sampling (chains[].oam.sample):") || !strings.Contains(out, "web 1 in 100: 3000 packets, 30 marked") {
		t.Errorf("status text has no sampling section:\n%s", out)
	}

	// The responder kept on nfv1 (web's first SID): iputils' ping -6 to
	// the SID is answered (Linux's seg6local alone drops it).
	sid := kc.Hops[1].SID
	if body := scrape(t, e.Lab.Agents["nfv1"].Metrics); !strings.Contains(body, `segchain_oam_responder_sids{node="nfv1"}`) {
		t.Errorf("nfv1's agent does not export its kept responder:\n%s", body)
	}
	if pout, err := exec.Command("ip", "netns", "exec", e.NS("ingress"), "ping", "-6", "-c", "2", "-W", "2", sid).CombinedOutput(); err != nil {
		t.Errorf("ping -6 %s (nfv1's End, responder kept): %v\n%s", sid, err, pout)
	}

	t.Run("tap-missing", func(t *testing.T) {
		// nfv2's agent keeps nothing now: its hop is not seen.
		s := e.Session(nil)
		defer s.Close()
		cl, ok := oamsvc.Domain(s).Remote.(*oamsvc.Client)
		if !ok {
			t.Fatal("no agents in the session")
		}
		if _, err := cl.Keep(context.Background(), "nfv2", oam.KeepSet{}); err != nil {
			t.Fatal(err)
		}
		chainStream(t, e, 7001, count, 1000, nil)
		kc := keptStatus(t, e)
		bad := checkKept(kc, 2*count, rate)
		if len(bad) == 0 {
			t.Fatalf("with nfv2's tap gone the check passed: %+v", kc)
		}
		t.Logf("without nfv2's tap: %s", strings.Join(bad, "; "))
	})

	// destroy drops what the agents kept: no sampling, no responder.
	e.Must("destroy", "--lab", e.Name)
	body := scrape(t, e.Lab.Agents["nfv1"].Metrics)
	for _, m := range []string{"segchain_sample_node_arrivals_total", "segchain_oam_responder_sids"} {
		if strings.Contains(body, m) {
			t.Errorf("nfv1's agent still exports %s after destroy", m)
		}
	}
}

func scrape(t *testing.T, target string) string {
	t.Helper()
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// Without agents nothing keeps the sampling between commands: apply says
// so, status names the way, and trace --metrics-listen without --sample
// runs the chain's declared 1 in 100 itself while a stream runs.
func TestKeptOAMWithoutAgents(t *testing.T) {
	const rate = 100
	e := labenv.New(t, labenv.Options{File: keptDomain(t, rate), Prefix: "oamn-", CLI: true, Binary: segchainBin})
	out, err := e.Run("apply", "--lab", e.Name)
	if err != nil || !strings.Contains(out, "chains[].oam: not kept on egress, ingress, nfv1, nfv2 (no agent") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	kc := keptStatus(t, e)
	if len(kc.Problems) != 1 || !strings.Contains(kc.Problems[0], "no node has an agent") {
		t.Errorf("status problems %v, want the one saying kept sampling is the agents'", kc.Problems)
	}
	var tout string
	chainStream(t, e, 7002, 1500, 500, func() {
		tout, err = e.Run("trace", "--lab", e.Name, "--metrics-listen", "127.0.0.1:0", "--duration", "2s", "web")
	})
	if err != nil {
		t.Fatalf("trace --metrics-listen: %v\n%s", err, tout)
	}
	i := strings.Index(tout, "sampled web:")
	if i < 0 {
		t.Fatalf("no totals:\n%s", tout)
	}
	var p, m, c, inc, hm uint64
	if _, err := fmt.Sscanf(tout[i:], "sampled web: %d packets, %d marked, %d seen at every hop, %d incomplete, %d not marked (HMAC)", &p, &m, &c, &inc, &hm); err != nil {
		t.Fatalf("%v\n%s", err, tout)
	}
	if p == 0 || m != (p+rate-1)/rate || c != m || inc != 0 {
		t.Errorf("%d packets, %d marked, %d seen at every hop, %d incomplete: want some, 1 in %d, all, 0\n%s", p, m, c, inc, rate, tout)
	}
}

// chainStream sends count datagrams s → d through web and fails the test
// when the chain lost one: every datagram reached d's UDP, received or
// dropped by the receiver's full socket buffer (a starved receiver on a
// loaded machine is not the chain losing packets).
func chainStream(t *testing.T, e *labenv.Env, port, count, rate int, during func()) {
	t.Helper()
	udp := func() (in, rcvbuf uint64) {
		m, err := oam.NodeStats(e.NS("d"))
		if err != nil {
			t.Fatal(err)
		}
		return m["Udp6InDatagrams"], m["Udp6RcvbufErrors"]
	}
	in0, rb0 := udp()
	res := testutil.Stream(t, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", port, count, rate, during)
	in1, rb1 := udp()
	switch {
	case res.Sent < count, during == nil && res.Sent != count:
		// With during, count is a minimum (testutil.Stream): a change
		// slower than the stream, on a loaded machine, gets a longer one.
		t.Errorf("stream sent %d of %d: %+v", res.Sent, count, res)
	case res.Lost != 0 && (in1-in0)+(rb1-rb0) < uint64(res.Sent):
		t.Errorf("stream lost %d, d's UDP saw %d + %d dropped for a full socket buffer of %d sent: %+v", res.Lost, in1-in0, rb1-rb0, res.Sent, res)
	case res.Lost != 0:
		t.Logf("stream lost %d at the receiver's socket (Udp6RcvbufErrors +%d); the chain delivered all %d", res.Lost, rb1-rb0, res.Sent)
	}
}

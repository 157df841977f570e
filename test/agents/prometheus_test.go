package agents

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// A real Prometheus server (Debian's prometheus) scrapes a lab agent's
// /metrics and answers a query for a counter the traffic moved; promtool
// accepts the exposition.
func TestPrivilegedPrometheusScrapesAgent(t *testing.T) {
	testutil.RequireTool(t, "prometheus")
	testutil.RequireTool(t, "promtool")
	e := newEnv(t, true)
	e.Must("apply", "--lab", e.Name)
	target := e.Lab.Agents["nfv2"].Metrics

	// promtool check metrics on one scrape.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	chk := exec.Command("promtool", "check", "metrics")
	chk.Stdin = strings.NewReader(string(body))
	if out, err := chk.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}

	prom := testutil.StartPrometheus(t, "segchain-agent", target)

	e.traffic() // 5 datagrams to 6000 and 5 to 6666 cross nfv2's firewall
	q := `segchain_sid_packets_total{job="segchain-agent",node="nfv2",behavior="End.AN.FW"}`
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; {
		v, raw, err := sum(prom.Query(q))
		last = raw
		if err == nil && v >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never saw the firewall's packets: last answer %s (%v)\nprometheus log:\n%s", last, err, prom.Log())
		}
		time.Sleep(500 * time.Millisecond)
	}
	drops, raw, err := sum(prom.Query(`segchain_service_drops_total{node="nfv2",behavior="End.AN.FW",reason="rule"}`))
	if err != nil || drops < 5 {
		t.Logf("firewall rule drops through prometheus: %v %s %v (informational)", drops, raw, err)
	}
}

// sum adds up the values of a Prometheus answer.
func sum(series map[string]float64, raw string, err error) (float64, string, error) {
	var v float64
	for _, x := range series {
		v += x
	}
	return v, raw, err
}

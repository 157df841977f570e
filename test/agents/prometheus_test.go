package agents

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: segchain-agent
    static_configs:
      - targets: [%q]
`, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	listen := "127.0.0.1:" + strconv.Itoa(port)
	prom := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	var plog strings.Builder
	prom.Stdout, prom.Stderr = &plog, &plog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
	})

	e.traffic() // 5 datagrams to 6000 and 5 to 6666 cross nfv2's firewall
	q := `segchain_sid_packets_total{job="segchain-agent",node="nfv2",behavior="End.AN.FW"}`
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; {
		v, raw, err := query(listen, q)
		last = raw
		if err == nil && v >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never saw the firewall's packets: last answer %s (%v)\nprometheus log:\n%s", last, err, plog.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	drops, raw, err := query(listen, `segchain_service_drops_total{node="nfv2",behavior="End.AN.FW",reason="rule"}`)
	if err != nil || drops < 5 {
		t.Logf("firewall rule drops through prometheus: %v %s %v (informational)", drops, raw, err)
	}
}

// query asks Prometheus' HTTP API for an instant vector and returns the
// sum of its values.
func query(addr, q string) (float64, string, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, string(b), err
	}
	if r.Status != "success" || len(r.Data.Result) == 0 {
		return 0, string(b), fmt.Errorf("no result")
	}
	sum := 0.0
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		sum += v
	}
	return sum, string(b), nil
}

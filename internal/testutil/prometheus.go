package testutil

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Prometheus is a real Prometheus server (Debian's prometheus) a test
// started with StartPrometheus.
type Prometheus struct {
	// Addr is its HTTP API's host:port.
	Addr string
	mu   sync.Mutex
	log  strings.Builder
}

func (p *Prometheus) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

// Log is what the server printed so far (for a failure's message).
func (p *Prometheus) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// StartPrometheus runs a Prometheus server that scrapes each target
// (host:port, /metrics) every second as job; it is killed when the test
// ends.
func StartPrometheus(t *testing.T, job string, targets ...string) *Prometheus {
	t.Helper()
	RequireTool(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%s]
`, job, quoteAll(targets))), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{Addr: l.Addr().String()}
	l.Close()
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.Addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// Query asks the server for the instant vector of q: each series' value
// by its labels other than __name__, job, instance and those named in
// drop, joined "k=v,…" ("" for none); and the raw answer.
func (p *Prometheus) Query(q string, drop ...string) (map[string]float64, string, error) {
	resp, err := http.Get("http://" + p.Addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, string(b), err
	}
	if r.Status != "success" {
		return nil, string(b), fmt.Errorf("status %s", r.Status)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		var ls []string
		for k, v := range s.Metric {
			if k != "__name__" && k != "job" && k != "instance" && !slices.Contains(drop, k) {
				ls = append(ls, k+"="+v)
			}
		}
		slices.Sort(ls)
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		out[strings.Join(ls, ",")] = v
	}
	return out, string(b), nil
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveGuarded serves an agent's /metrics behind Guard on a loopback
// socket and returns its address.
func serveGuarded(t *testing.T, m *Metrics, a Access) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Guarded(a))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return l.Addr().String()
}

func get(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Who may scrape, over real sockets: loopback by default, a source
// outside --metrics-allow gets 403, a request without the bearer token
// (or with another) 401; refusals are counted.
func TestGuard(t *testing.T) {
	m := New(fake(), Build{Version: "v"}, nil)
	for _, tc := range []struct {
		name   string
		access Access
		token  string
		want   int
	}{
		{"default: loopback", Access{}, "", http.StatusOK},
		{"source not allowed", Access{Allow: []netip.Prefix{netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("10.0.0.0/8")}}, "", http.StatusForbidden},
		{"source allowed", Access{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, "", http.StatusOK},
		{"token missing", Access{Token: []byte("s3cr3t-token")}, "", http.StatusUnauthorized},
		{"token wrong", Access{Token: []byte("s3cr3t-token")}, "s3cr3t-tokem", http.StatusUnauthorized},
		{"token right", Access{Token: []byte("s3cr3t-token")}, "s3cr3t-token", http.StatusOK},
		{"token right, source not", Access{Allow: []netip.Prefix{netip.MustParsePrefix("::1/128")}, Token: []byte("s3cr3t-token")}, "s3cr3t-token", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, serveGuarded(t, m, tc.access), tc.token)
			if code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
			if code == http.StatusOK && !strings.Contains(body, "segchain_sid_packets_total") {
				t.Errorf("no metrics served:\n%s", body)
			}
			if code != http.StatusOK && strings.Contains(body, "segchain_") {
				t.Errorf("a refused scrape got metrics:\n%s", body)
			}
		})
	}
	code, body := get(t, serveGuarded(t, m, Access{}), "")
	if code != http.StatusOK || !strings.Contains(body, `segchain_agent_metrics_denied_total{reason="source"} 2`) ||
		!strings.Contains(body, `segchain_agent_metrics_denied_total{reason="token"} 2`) {
		t.Errorf("refusals not counted:\n%s", body)
	}
}

func TestParseAllowAndToken(t *testing.T) {
	got, err := ParseAllow([]string{"fd00:1::/64", "10.1.2.3", "fd00:2::5/64"})
	if err != nil || fmt.Sprint(got) != "[fd00:1::/64 10.1.2.3/32 fd00:2::/64]" {
		t.Errorf("ParseAllow = %v, %v", got, err)
	}
	if _, err := ParseAllow([]string{"nonsense"}); err == nil {
		t.Error("ParseAllow accepted nonsense")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "tok")
	os.WriteFile(f, []byte("abc\n"), 0o644)
	if _, err := ReadToken(f); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable token file: %v, want refused", err)
	}
	os.Chmod(f, 0o600)
	if tok, err := ReadToken(f); err != nil || string(tok) != "abc" {
		t.Errorf("ReadToken = %q, %v", tok, err)
	}
}

// A real Prometheus (Debian's) scrapes a guarded /metrics with the bearer
// token from a credentials file (up = 1, a value read); a job without it
// is refused (up = 0).
func TestPrometheusScrapesWithToken(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatal("prometheus not installed (scripts/deps.sh installs it): " + err.Error())
	}
	m := New(fake(), Build{Version: "v"}, nil)
	target := serveGuarded(t, m, Access{Token: []byte("prom-token-0123")})
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("prom-token-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: with-token
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
  - job_name: without
    static_configs: [{targets: [%q]}]
`, tok, target, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	prom := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	var plog strings.Builder
	prom.Stdout, prom.Stderr = &plog, &plog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Process.Kill(); prom.Wait() })
	want := map[string]float64{
		`up{job="with-token"}`: 1,
		`up{job="without"}`:    0,
		`segchain_sid_packets_total{job="with-token",sid="fc00:2::2/128"}`: 5,
	}
	var last string
	for deadline := time.Now().Add(60 * time.Second); ; {
		ok := true
		for q, v := range want {
			got, raw, err := promQuery(listen, q)
			if err != nil || got != v {
				ok, last = false, q+": "+raw
				break
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: last answer %s\nlog:\n%s", last, plog.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func promQuery(addr, q string) (float64, string, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Data.Result) != 1 {
		return 0, string(b), fmt.Errorf("no single result")
	}
	v, err := strconv.ParseFloat(fmt.Sprint(r.Data.Result[0].Value[1]), 64)
	return v, string(b), err
}

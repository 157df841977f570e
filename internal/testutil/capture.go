package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Capture is a tcpdump running inside a namespace and writing a pcap file.
// It is started before the traffic and returns only once tcpdump listens.
type Capture struct {
	t      testing.TB
	cmd    *exec.Cmd
	path   string
	done   chan struct{}
	stderr *bytes.Buffer
	mu     *sync.Mutex
	once   sync.Once
}

// StartCapture runs tcpdump on iface in namespace ns with a pcap-filter
// expression (may be empty), stopping by itself after count packets when
// count > 0. It waits until tcpdump reports it is listening. The process is
// killed in t.Cleanup if the test never calls Wait.
func StartCapture(t testing.TB, ns, iface, filter string, count int) *Capture {
	t.Helper()
	return startCapture(t, ns, iface, filter, count, nil)
}

// StartInboundCapture is StartCapture for the packets iface receives only
// (tcpdump -Q in). Use it rather than the pcap-filter keyword "inbound",
// which on this libpcap leaves matching packets stuck in the ring buffer.
func StartInboundCapture(t testing.TB, ns, iface, filter string, count int) *Capture {
	t.Helper()
	return startCapture(t, ns, iface, filter, count, []string{"-Q", "in"})
}

func startCapture(t testing.TB, ns, iface, filter string, count int, extra []string) *Capture {
	t.Helper()
	RequireTool(t, "tcpdump")
	path := filepath.Join(t.TempDir(), UniqueName("cap-")+".pcap")
	args := []string{"ip", "netns", "exec", ns, "tcpdump", "-Z", "root", "-n", "-U", "--immediate-mode",
		"-i", iface, "-w", path}
	args = append(args, extra...)
	if count > 0 {
		args = append(args, "-c", fmt.Sprint(count))
	}
	if filter != "" {
		args = append(args, filter)
	}
	cmd := exec.Command(args[0], args[1:]...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{t: t, cmd: cmd, path: path, done: make(chan struct{}), stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tcpdump in %s: %v", ns, err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		signalled := false
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "listening on") {
				close(ready)
				signalled = true
			}
		}
		if !signalled {
			close(ready)
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() { c.stop() })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		c.stop()
		t.Fatalf("tcpdump in %s on %s did not start listening: %s", ns, iface, c.Log())
	}
	select {
	case <-c.done:
		t.Fatalf("tcpdump in %s on %s exited early: %s", ns, iface, c.Log())
	default:
	}
	return c
}

// Log returns what tcpdump wrote on stderr (its packet statistics once stopped).
func (c *Capture) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *Capture) stop() {
	c.once.Do(func() {
		select {
		case <-c.done:
			return
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// Wait lets tcpdump run until it has its count of packets or until timeout
// has passed (a bound on the wait, not an assertion), stops it and returns
// the pcap path.
func (c *Capture) Wait(timeout time.Duration) string {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
	}
	c.stop()
	return c.path
}

// Packet is one packet as tshark dissects it: every requested field with all
// its occurrences in protocol order (outer header first).
type Packet map[string][]string

// First returns the first occurrence of field, or "".
func (p Packet) First(field string) string {
	if v := p[field]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Tshark dissects a pcap with tshark and returns the requested fields of
// every packet. tshark is the oracle: segchain's own decoders are not used.
func Tshark(t testing.TB, pcap string, fields ...string) []Packet {
	t.Helper()
	RequireTool(t, "tshark")
	args := []string{"-r", pcap, "-n", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("tshark -r %s: %v\n%s", pcap, err, stderr)
	}
	var pkts []Packet
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		p := Packet{}
		for i, f := range fields {
			if i < len(cols) && cols[i] != "" {
				p[f] = strings.Split(cols[i], "|")
			}
		}
		pkts = append(pkts, p)
	}
	return pkts
}

package srv6svc

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestHelperService is not a test: the failure test runs the test binary
// again as a service process it can kill.
func TestHelperService(t *testing.T) {
	if os.Getenv("SRV6SVC_HELPER") != "1" {
		t.Skip("helper process for TestPrivilegedOnFailure")
	}
	pol, _ := ParseOnFailure(os.Getenv("SRV6SVC_POLICY"))
	s, err := Listen(Config{Name: "victim", SIDs: []netip.Prefix{sid("fc00:5::100/128")}, Netns: os.Getenv("SRV6SVC_NETNS"),
		Interfaces: []string{"nin"}, OnFailure: pol})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_ = s.Serve(context.Background(), func(*Packet) Verdict { return Forward })
}

func startVictim(t *testing.T, netns, policy string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperService$", "-test.v")
	cmd.Env = append(os.Environ(), "SRV6SVC_HELPER=1", "SRV6SVC_NETNS="+netns, "SRV6SVC_POLICY="+policy)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line := sc.Text(); line == "ready" {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		} else if strings.HasPrefix(line, "error") {
			t.Fatalf("service process: %s", line)
		}
	}
	t.Fatal("service process exited before binding")
	return nil
}

func binding(t *testing.T, netns, name string) Binding {
	t.Helper()
	bs, err := Status(netns)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("binding %q not in %+v", name, bs)
	return Binding{}
}

// TestPrivilegedOnFailure kills the service process (SIGKILL) in the middle
// of a stream: the kernel removes its sockets from the XSKMAP, and the SID's
// on-failure policy applies to the rest of the stream, counted; a new
// process then binds the SID again.
func TestPrivilegedOnFailure(t *testing.T) {
	for _, policy := range []string{"drop", "bypass"} {
		t.Run(policy, func(t *testing.T) {
			tp := svctest.New(t, "h17f")
			t.Cleanup(func() { _ = Unbind(tp.NFV, "victim") })
			victim := startVictim(t, tp.NFV, policy)
			const total = 400
			c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 0)
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				tp.SendPaced(t, "", fmt.Sprintf(`[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=i, dport=9)) for i in range(%d)]`, total), 0.005)
			}()
			// Kill once part of the stream went through the service.
			deadline := time.Now().Add(20 * time.Second)
			for binding(t, tp.NFV, "victim").Counters.Steered < 50 {
				if time.Now().After(deadline) {
					t.Fatal("no packet reached the service")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			victim.Wait()
			<-sent
			time.Sleep(200 * time.Millisecond)
			sink := len(testutil.Tshark(t, c.Wait(time.Second), "ipv6.dst"))
			b := binding(t, tp.NFV, "victim")
			cn := b.Counters
			t.Logf("sink %d, binding %+v", sink, b)
			if b.State != "dead" {
				t.Errorf("state %q, want dead", b.State)
			}
			if cn.Steered+cn.NoSocketDrop+cn.NoSocketBypass != total {
				t.Errorf("steered %d + no-socket %d/%d != %d sent", cn.Steered, cn.NoSocketDrop, cn.NoSocketBypass, total)
			}
			switch policy {
			case "drop":
				if cn.NoSocketDrop == 0 || cn.NoSocketBypass != 0 {
					t.Errorf("want packets dropped for want of a socket, none bypassed: %+v", cn)
				}
				if sink > int(cn.Steered) {
					t.Errorf("sink got %d > %d steered: dropped packets leaked", sink, cn.Steered)
				}
			case "bypass":
				if cn.NoSocketBypass == 0 || cn.NoSocketDrop != 0 {
					t.Errorf("want packets bypassed, none dropped: %+v", cn)
				}
				if sink < int(cn.NoSocketBypass) {
					t.Errorf("sink got %d < %d bypassed: the kernel's End did not forward them", sink, cn.NoSocketBypass)
				}
			}

			// Bind again: the SID serves again.
			startVictim(t, tp.NFV, policy)
			before := binding(t, tp.NFV, "victim").Counters.Steered
			c2 := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 10)
			tp.Send(t, "", `[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=i, dport=9)) for i in range(10)]`)
			if n := len(testutil.Tshark(t, c2.Wait(5*time.Second), "ipv6.dst")); n != 10 {
				t.Errorf("after binding again the sink got %d packets, want 10", n)
			}
			if b := binding(t, tp.NFV, "victim"); b.State != "serving" || b.Counters.Steered != before+10 {
				t.Errorf("after binding again: state %q, steered %d, want serving, %d", b.State, b.Counters.Steered, before+10)
			}
		})
	}
}

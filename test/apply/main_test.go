package apply

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// segchainBin is the binary under test, built once by TestMain (or taken
// from $SEGCHAIN_BIN).
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

// domainFile is the default domain: a proxy (nfv1-fw, End.AD on nfv1)
// and a firewall (nfv2-fw on nfv2) next to native chains.
const domainFile = "../../examples/default.yaml"

// env is one lab of the default domain, brought up with the binary
// (labenv: cleaned up and checked for leftovers at the end).
type env struct{ *labenv.Env }

// newEnv brings up a uniquely named lab (h12a-<hex>).
func newEnv(t *testing.T) *env { return newEnvFile(t, domainFile, "h12a-") }

// newEnvFile is newEnv for the domain in file, the lab named prefix<hex>.
func newEnvFile(t *testing.T, file, prefix string) *env {
	return &env{labenv.New(t, labenv.Options{File: file, Prefix: prefix, CLI: true, Binary: segchainBin, Tools: []string{"python3"}})}
}

// domain runs a domain verb (apply, plan, status, destroy) on the lab.
func (e *env) domain(verb string, args ...string) (string, error) {
	return e.Run(append([]string{verb, "-f", domainFile, "--lab", e.Name}, args...)...)
}

// pinRoot is where segchain pins (bpfpin.Root).
func pinRoot(t testing.TB) string {
	t.Helper()
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// pinDir is the bpffs directory of program ("proxy", "fw") on node.
func (e *env) pinDir(node, program string) string {
	e.T.Helper()
	name, _, err := bpfpin.Namespace(e.NS(node))
	if err != nil {
		e.T.Fatal(err)
	}
	return filepath.Join(pinRoot(e.T), name, program)
}

// linkPin is the TCX link pin of program on node's interface dev.
func (e *env) linkPin(node, program, dev string) string {
	e.T.Helper()
	out := testutil.Exec(e.T, e.NS(node), "cat", "/sys/class/net/"+dev+"/ifindex")
	idx, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		e.T.Fatal(err)
	}
	return filepath.Join(e.pinDir(node, program), fmt.Sprintf("tcx-%d", idx))
}

// traffic sends n UDP datagrams of the "filtered" chain (dport 6000,
// through the firewall on nfv2) and n TCP connections of the "firewalled"
// chain (dport 8080, through the proxy on nfv1) from s to d, and returns
// how many of each arrived (UDP datagrams received by d, TCP exchanges
// completed).
func (e *env) traffic(n int) (udp, tcp int) {
	e.T.Helper()
	srv := exec.Command("ip", "netns", "exec", e.NS("d"), "python3", "-c", fmt.Sprintf(`
import socket, threading, time
n=%d
u=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.bind(("::",6000)); u.settimeout(0.5)
t=socket.socket(socket.AF_INET6); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("::",8080)); t.listen(16); t.settimeout(0.5)
def tcp():
    end=time.time()+30
    while time.time()<end:
        try:
            c,_=t.accept()
        except socket.timeout:
            continue
        c.settimeout(2)
        try:
            c.sendall(b"pong:"+c.recv(100))
        except OSError:
            pass
        c.close()
threading.Thread(target=tcp, daemon=True).start()
print("ready", flush=True)
seen=set(); end=time.time()+30; idle=0
while time.time()<end and len(seen)<n:
    try:
        d,_=u.recvfrom(100); seen.add(d); idle=0
    except socket.timeout:
        idle+=1
        if idle>6: break
print(len(seen), flush=True)
`, n))
	stdout, err := srv.StdoutPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		e.T.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	rd := bufio.NewReader(stdout)
	if _, err := rd.ReadString('\n'); err != nil {
		e.T.Fatalf("receiver did not start: %v", err)
	}
	out, err := testutil.ExecErr(e.NS("s"), "python3", "-c", fmt.Sprintf(`
import socket, time
n=%d
ok=0
for i in range(n):
    try:
        c=socket.create_connection(("fc00:4d::d",8080),timeout=1); c.sendall(b"%%d"%%i)
        if c.recv(100)==b"pong:%%d"%%i: ok+=1
        c.close()
    except OSError:
        pass
u=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for i in range(n):
    u.sendto(b"seq%%d"%%i, ("fc00:4d::d",6000)); time.sleep(0.005)
print(ok)
`, n))
	if err != nil {
		e.T.Fatalf("sender: %v\n%s", err, out)
	}
	tcp, _ = strconv.Atoi(strings.TrimSpace(out))
	line, _ := rd.ReadString('\n')
	udp, _ = strconv.Atoi(strings.TrimSpace(line))
	return udp, tcp
}

// waitExit waits for cmd with a generous bound (a hung command is a bug
// of its own, not a timing assertion).
func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not finish", cmd.Args)
		return nil
	}
}

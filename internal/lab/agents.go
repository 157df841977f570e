package lab

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pki"
)

// Lab agents (lab up --agents): a real `segchain agent` process per node,
// reached over a management network outside the data plane: a bridge in
// the host namespace with a per-lab ULA /64 (fd5e:HASH::/64), and in every
// node an interface mgmt0 on it. docs/agents.md.

// ControllerName is the name in the lab controller's certificate.
const ControllerName = "lab"

// AgentPort is the port lab agents listen on (on their mgmt0 address);
// MetricsPort their /metrics.
const (
	AgentPort   = 7070
	MetricsPort = 9470
	MgmtIface   = "mgmt0"
)

// Mgmt is a lab's management network as created.
type Mgmt struct {
	Bridge string `json:"bridge"`
	Prefix string `json:"prefix"`
	// Veths are the host-side ends created (the node ends go with the
	// namespaces).
	Veths []string `json:"veths,omitempty"`
}

// AgentState is one running lab agent.
type AgentState struct {
	Addr    string `json:"addr"`    // gRPC HOST:PORT
	Metrics string `json:"metrics"` // /metrics HOST:PORT
	PID     int    `json:"pid,omitempty"`
	Log     string `json:"log"`
}

func (l *Lab) hash() uint32 {
	h := fnv.New32a()
	h.Write([]byte(l.Name))
	return h.Sum32()
}

func (l *Lab) agentDir() string { return filepath.Join(StateDir, l.Name+".agents") }

// mgmtAddr is the i-th address of the management prefix (1: the host).
func mgmtAddr(prefix netip.Prefix, i int) netip.Addr {
	b := prefix.Addr().As16()
	b[14], b[15] = byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}

// StartAgents builds the management network and starts a `exe agent`
// process for every node, with certificates of a lab CA, under the lab's
// supervisor (`self lab supervise`, supervise.go), and waits until each
// answers. On failure everything it made is removed again.
func (l *Lab) StartAgents(self, exe string) error {
	if len(l.Agents) > 0 {
		return fmt.Errorf("lab %s already runs agents", l.Name)
	}
	h := l.hash()
	pfx := netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x5e, byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)}), 64)
	l.Mgmt = &Mgmt{Bridge: fmt.Sprintf("smb%06x", h&0xffffff), Prefix: pfx.String()}
	l.AgentPKI = filepath.Join(l.agentDir(), "pki")
	l.Agents = map[string]*AgentState{}
	if err := l.save(); err != nil {
		return err
	}
	err := l.startAgents(self, exe, pfx)
	if err != nil {
		return errors.Join(fmt.Errorf("lab %s: start agents: %w", l.Name, err), l.StopAgents())
	}
	return l.save()
}

func (l *Lab) startAgents(self, exe string, pfx netip.Prefix) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: l.Mgmt.Bridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("management bridge %s: %w", br.Name, err)
	}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: prefixToIPNet(netip.PrefixFrom(mgmtAddr(pfx, 1), 64)), Flags: unix.IFA_F_NODAD}); err != nil {
		return fmt.Errorf("management bridge address: %w", err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return err
	}
	if err := os.MkdirAll(l.AgentPKI, 0o700); err != nil {
		return err
	}
	if err := pki.Init(l.AgentPKI, "lab "+l.Name); err != nil {
		return err
	}
	if _, err := pki.Issue(l.AgentPKI, pki.RoleController, ControllerName, pki.IssueOptions{}); err != nil {
		return err
	}
	for i, node := range l.NodeNames() {
		addr := mgmtAddr(pfx, i+2)
		if err := l.mgmtLink(br, node, i, addr); err != nil {
			return fmt.Errorf("node %s: management interface: %w", node, err)
		}
		if _, err := pki.Issue(l.AgentPKI, pki.RoleNode, node, pki.IssueOptions{Hosts: []string{addr.String()}}); err != nil {
			return err
		}
		l.Agents[node] = &AgentState{
			Addr:    net.JoinHostPort(addr.String(), strconv.Itoa(AgentPort)),
			Metrics: net.JoinHostPort(addr.String(), strconv.Itoa(MetricsPort)),
			Log:     filepath.Join(l.agentDir(), node+".log"),
		}
		if err := l.setWant(node, AgentWant{Run: true, Exe: exe, Gen: 1}); err != nil {
			return err
		}
	}
	if err := l.permanentNeighbours(br); err != nil {
		return err
	}
	if err := l.save(); err != nil {
		return err
	}
	// The supervisor starts them all; then wait for each (they start up
	// in parallel).
	if err := l.startSupervisor(self); err != nil {
		return err
	}
	return l.waitAllStarted(l.NodeNames(), startStall)
}

// startStall bounds how long lab up waits without any agent starting.
// Not a bound on the whole start: hundreds of agents (and a fabric's FRR
// daemons) share the machine's cores, so the last may come up minutes
// after the first, but a start that stops progressing is stuck.
const startStall = 60 * time.Second

// waitAllStarted waits until every node's first agent runs and answers:
// it fails when none started for stall (then naming a node still
// waiting), not when the whole start takes longer.
func (l *Lab) waitAllStarted(nodes []string, stall time.Duration) error {
	running := func(node string) bool {
		r := l.AgentStatus(node)
		return r.Gen >= 1 && r.State == AgentRunning && r.PID > 0
	}
	err := waitProgress(nodes, stall, running, func(node string) error { return l.waitAgent(node, stall) })
	var st stalled
	if errors.As(err, &st) {
		r := l.AgentStatus(st.node)
		return fmt.Errorf("node %s: the lab's supervisor started no agent for %v, %d of %d not running (%s: state %s, last exit %q; logs %s, %s)",
			st.node, stall, st.left, len(nodes), st.node, r.State, r.LastExit, l.supervisorLog(), l.Agents[st.node].Log)
	}
	return err
}

// stalled is waitProgress's error: no node got ready for its bound.
type stalled struct {
	node string // the first still waiting
	left int
}

func (s stalled) Error() string {
	return fmt.Sprintf("node %s and %d more not started", s.node, s.left-1)
}

// waitProgress polls until running reports every node, calling ready on
// each as it does; it fails (stalled) only when no node did for stall.
func waitProgress(nodes []string, stall time.Duration, running func(string) bool, ready func(string) error) error {
	pending := slices.Clone(nodes)
	progress := time.Now()
	for len(pending) > 0 {
		left := pending[:0]
		for _, node := range pending {
			if !running(node) {
				left = append(left, node)
				continue
			}
			if err := ready(node); err != nil {
				return err
			}
			progress = time.Now()
		}
		pending = left
		if len(pending) > 0 && time.Since(progress) > stall {
			return stalled{node: pending[0], left: len(pending)}
		}
		if len(pending) > 0 {
			time.Sleep(min(50*time.Millisecond, stall/10))
		}
	}
	return nil
}

// mgmtLink creates a veth from the bridge into node's namespace as mgmt0
// with addr.
func (l *Lab) mgmtLink(br *netlink.Bridge, node string, i int, addr netip.Addr) error {
	host := fmt.Sprintf("sm%06x%d", l.hash()&0xffffff, i)
	l.Mgmt.Veths = append(l.Mgmt.Veths, host)
	if err := l.save(); err != nil {
		return err
	}
	ns, err := netns.GetFromPath(nsutil.Path(l.Nodes[node]))
	if err != nil {
		return err
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MasterIndex: br.Attrs().Index}, PeerName: MgmtIface, PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return err
	}
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(hl, br); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return err
	}
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer nh.Close()
	ml, err := nh.LinkByName(MgmtIface)
	if err != nil {
		return err
	}
	if err := nh.AddrAdd(ml, &netlink.Addr{IPNet: prefixToIPNet(netip.PrefixFrom(addr, 64)), Flags: unix.IFA_F_NODAD}); err != nil {
		return err
	}
	if err := nh.LinkSetUp(ml); err != nil {
		return err
	}
	l.mgmtMACs = append(l.mgmtMACs, mgmtNeigh{addr, ml.Attrs().HardwareAddr})
	return nil
}

// mgmtNeigh is a node's management address and its mgmt0's MAC.
type mgmtNeigh struct {
	addr netip.Addr
	mac  net.HardwareAddr
}

// permanentNeighbours makes the host's neighbour entry of every agent
// permanent. The host's neighbour table is shared by every lab: past
// gc_thresh2 (512) learned entries are collected, past gc_thresh3 (1024)
// new ones refused, and at 500 agents a hundred were unreachable ("no
// route to host"); permanent entries are outside that accounting
// (docs/scale.md). Set once every port is on the bridge: a port that
// changes the bridge's address flushes its neighbours, permanent ones too.
func (l *Lab) permanentNeighbours(br *netlink.Bridge) error {
	for _, n := range l.mgmtMACs {
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: br.Attrs().Index, Family: unix.AF_INET6, State: netlink.NUD_PERMANENT,
			IP: n.addr.AsSlice(), HardwareAddr: n.mac}); err != nil {
			return fmt.Errorf("management neighbour %s: %w", n.addr, err)
		}
	}
	return nil
}

// StartAgent (re)starts node's agent, as `exe agent ... extra` (e.g.
// --reconcile), through the lab's supervisor (started first if it does
// not run: after StopAgents, or if it was killed), and waits until it
// answers. A running agent is restarted.
func (l *Lab) StartAgent(exe, node string, extra ...string) error {
	return l.startAgent("", exe, node, extra)
}

// startAgent is StartAgent with the segchain binary to run the supervisor
// with ("": the one recorded, else exe).
func (l *Lab) startAgent(self, exe, node string, extra []string) error {
	if l.Agents[node] == nil {
		return fmt.Errorf("lab %s: node %s has no agent", l.Name, node)
	}
	w := l.Want(node)
	w.Run, w.Exe, w.Extra = true, exe, extra
	w.Gen = max(w.Gen, l.AgentStatus(node).Gen) + 1
	if err := l.setWant(node, w); err != nil {
		return err
	}
	if !l.SupervisorAlive() {
		if self == "" && l.Supervisor != nil {
			self = l.Supervisor.Exe
		}
		if self == "" {
			self = exe
		}
		if err := l.startSupervisor(self); err != nil {
			return err
		}
	}
	return l.waitStarted(node, w.Gen, 20*time.Second)
}

// waitStarted waits until the supervisor has started generation gen of
// node's agent and it answers.
func (l *Lab) waitStarted(node string, gen int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		r := l.AgentStatus(node)
		if r.Gen >= gen && r.State == AgentRunning && r.PID > 0 {
			return l.waitAgent(node, time.Until(deadline))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: the lab's supervisor did not start its agent within %v (state %s, last exit %q; logs %s, %s)",
				node, limit, r.State, r.LastExit, l.supervisorLog(), l.Agents[node].Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentCmd is node's agent command (not started), its output appended to
// the agent's log: close the returned file once it started.
func (l *Lab) agentCmd(exe, node string, extra ...string) (*exec.Cmd, *os.File, error) {
	a := l.Agents[node]
	if a == nil {
		return nil, nil, fmt.Errorf("lab %s: node %s has no agent", l.Name, node)
	}
	state := filepath.Join(l.agentDir(), "state", node)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, nil, err
	}
	logf, err := os.OpenFile(a.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	// Only the lab's controller may control, only the management
	// network (the host, a Prometheus on it) may scrape.
	args := []string{"agent", "--node", node, "--netns", l.Nodes[node], "--listen", a.Addr,
		"--pki", l.AgentPKI, "--allow-controller", ControllerName, "--state-dir", state,
		"--metrics", a.Metrics, "--log-format", "json"}
	if l.Mgmt != nil {
		args = append(args, "--metrics-allow", l.Mgmt.Prefix)
	}
	cmd := exec.Command(exe, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: no terminal signal reaches it; the supervisor
	// and lab down stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, logf, nil
}

// waitAgent waits until node's agent answers Health over mTLS.
func (l *Lab) waitAgent(node string, limit time.Duration) error {
	a := l.Agents[node]
	tc, err := pki.ClientTLS(pki.DirFiles(l.AgentPKI, pki.RoleController, ControllerName), node)
	if err != nil {
		return err
	}
	c, err := client.Dial(node, a.Addr, tc)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetTimeout(2 * time.Second)
	deadline := time.Now().Add(limit)
	for {
		_, err := c.Health(context.Background())
		if err == nil {
			return nil
		}
		if !l.agentAlive(node) {
			// An agent re-executes itself inside its namespace as it
			// starts (cmd/segchain/agent_netns.go): while the kernel
			// replaces its image, /proc/PID/cmdline reads empty. Look
			// again before calling it gone.
			time.Sleep(200 * time.Millisecond)
			if !l.agentAlive(node) {
				return fmt.Errorf("node %s: agent exited (log %s): %w", node, a.Log, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: agent does not answer after %v: %w", node, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentAlive: the agent pid the supervisor recorded is a live segchain
// agent of this lab's node (a recycled pid is someone else's process).
func (l *Lab) agentAlive(node string) bool {
	var r AgentRun
	if readJSONFile(l.runPath(node), &r) != nil {
		return false
	}
	return l.agentPIDAlive(node, r.PID)
}

// StopAgent stops node's agent and keeps it stopped (the supervisor does
// not restart it until StartAgent): SIGTERM, then SIGKILL after 5 s
// (force: SIGKILL at once, as a crash would). It waits until the process
// is gone.
func (l *Lab) StopAgent(node string, force bool) error {
	if l.Agents[node] == nil {
		return nil
	}
	w := l.Want(node)
	w.Run = false
	if err := l.setWant(node, w); err != nil {
		return fmt.Errorf("node %s: stop agent: %w", node, err)
	}
	var r AgentRun
	_ = readJSONFile(l.runPath(node), &r)
	if !l.agentPIDAlive(node, r.PID) {
		return nil
	}
	stopPID(r.PID, force, func() bool { return !l.agentPIDAlive(node, r.PID) })
	return nil
}

// StopAgents stops every agent of the lab and removes the management
// network and the lab PKI.
func (l *Lab) StopAgents() error {
	var errs []error
	// The supervisor first (it stops its agents), so that nothing
	// restarts what is stopped next.
	errs = append(errs, l.stopSupervisor())
	if l.Agents != nil {
		for _, n := range l.NodeNames() {
			errs = append(errs, l.StopAgent(n, false))
		}
		// Whatever agent of the lab is left: one started by hand, or by
		// a supervisor killed before it recorded its pid.
		for _, pid := range l.strayAgents() {
			stopPID(pid, false, func() bool { return !alive(pid) })
		}
	}
	if l.Mgmt != nil {
		for _, v := range l.Mgmt.Veths {
			if lk, err := netlink.LinkByName(v); err == nil {
				errs = append(errs, netlink.LinkDel(lk))
			}
		}
		if lk, err := netlink.LinkByName(l.Mgmt.Bridge); err == nil {
			errs = append(errs, netlink.LinkDel(lk))
		}
	}
	if l.Mgmt != nil || l.Agents != nil {
		errs = append(errs, os.RemoveAll(l.agentDir()))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.Mgmt, l.Agents, l.AgentPKI, l.Supervisor = nil, nil, "", nil
	return nil
}

// alive: pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z" && f[2] != "X"
}

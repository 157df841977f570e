package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agents of a lab (lab up --agents) run under a supervisor, as
// systemd runs segchain-agent.service in production: one detached
// `segchain lab supervise --lab NAME` process per lab (its pid in the lab
// state, Lab.Supervisor) starts every agent, restarts one that exits with
// exponential backoff, and records each agent's pid and state in a file
// of its own (run/NODE.json under the lab's agent directory; nothing else
// writes it). What each agent should be doing is in run/NODE.want.json,
// written only by the lab package's callers (StartAgent, StopAgent,
// RestartAgents): the supervisor never writes the lab state file, and no
// caller writes a status file, so there is no writer race on either.
// lab down stops the supervisor first (it stops its agents), then kills
// any agent of the lab still alive: the recorded pids, and any process
// that is a segchain agent of one of the lab's nodes (one restarted by
// hand included).

// Backoff bounds of the supervisor's restarts: the delay doubles from
// BackoffMin after each exit, up to BackoffMax; an agent that ran for
// BackoffReset starts again from BackoffMin.
const (
	BackoffMin   = 200 * time.Millisecond
	BackoffMax   = 10 * time.Second
	BackoffReset = 30 * time.Second
)

// MaxStarting agents may be starting (not yet accepting connections) at
// once; a start that has not accepted for StartingHold no longer counts.
// An agent's start is mostly CPU (it re-executes itself in its namespace
// and loads the kernel's BTF), so hundreds started at once share the cores
// evenly and none accepts for minutes: lab up of a 500-node fabric saw
// none of 500 running after 60 s. Started a few at a time they come up
// one after another.
var (
	MaxStarting  = 4 * runtime.NumCPU()
	StartingHold = 20 * time.Second
)

// startingNow counts the runs starting now, only starts younger than
// StartingHold (a start that hangs does not hold the others back).
func startingNow(runs map[string]*AgentRun, now time.Time) int {
	n := 0
	for _, r := range runs {
		if r.State == AgentStarting && now.Sub(r.Since) < StartingHold {
			n++
		}
	}
	return n
}

// Agent states in AgentRun.State.
const (
	AgentStarting = "starting" // started, not accepting connections yet
	AgentRunning  = "running"  // alive and accepting connections
	AgentBackoff  = "backoff"  // it exited; restarted at NextStart
	AgentStopped  = "stopped"  // stopped on purpose (StopAgent, lab down)
	AgentNoSuperv = "unsupervised"
)

// SupervisorState is a lab's supervisor process.
type SupervisorState struct {
	PID int    `json:"pid"`
	Exe string `json:"exe"` // the segchain binary it runs (lab supervise)
	Log string `json:"log"`
}

// AgentWant is what an agent should be doing (run/NODE.want.json).
type AgentWant struct {
	Run bool `json:"run"`
	// Exe runs `Exe agent ...`; Extra are more agent flags.
	Exe   string   `json:"exe"`
	Extra []string `json:"extra,omitempty"`
	// Gen changes on every StartAgent/RestartAgents: the supervisor
	// restarts a running agent of another generation at once.
	Gen int `json:"gen"`
}

// AgentRun is an agent's process as its supervisor last saw it
// (run/NODE.json).
type AgentRun struct {
	PID       int       `json:"pid,omitempty"`
	State     string    `json:"state"`
	Gen       int       `json:"gen"`
	Restarts  int       `json:"restarts"`
	Since     time.Time `json:"since"`
	LastExit  string    `json:"last_exit,omitempty"`
	NextStart time.Time `json:"next_start,omitzero"`
}

func (l *Lab) runDir() string              { return filepath.Join(l.agentDir(), "run") }
func (l *Lab) wantPath(node string) string { return filepath.Join(l.runDir(), node+".want.json") }
func (l *Lab) runPath(node string) string  { return filepath.Join(l.runDir(), node+".json") }
func (l *Lab) supervisorLog() string       { return filepath.Join(l.agentDir(), "supervisor.log") }

// writeAtomic writes v as JSON to path through a temporary file and a
// rename: a reader sees the old file or the new one, never a torn one.
func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.new")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Want returns what node's agent should be doing (run, with no extra
// flags, when nothing says otherwise).
func (l *Lab) Want(node string) AgentWant {
	w := AgentWant{Run: true}
	if err := readJSONFile(l.wantPath(node), &w); err != nil {
		w = AgentWant{Run: true}
	}
	return w
}

func (l *Lab) setWant(node string, w AgentWant) error {
	if err := os.MkdirAll(l.runDir(), 0o700); err != nil {
		return err
	}
	return writeAtomic(l.wantPath(node), w)
}

// AgentStatus is node's agent as its supervisor recorded it; with no
// supervisor running, State is AgentNoSuperv (the pid, if any, is the
// last recorded).
func (l *Lab) AgentStatus(node string) AgentRun {
	var r AgentRun
	if err := readJSONFile(l.runPath(node), &r); err != nil {
		r = AgentRun{}
	}
	if !l.SupervisorAlive() && r.State != AgentStopped {
		r.State = AgentNoSuperv
	}
	if r.PID > 0 && !l.agentPIDAlive(node, r.PID) {
		r.PID = 0
		if r.State == AgentRunning || r.State == AgentStarting || r.State == AgentNoSuperv {
			r.State = "dead"
		}
	}
	return r
}

// fillPIDs sets every agent's PID from its supervisor's record.
func (l *Lab) fillPIDs() {
	for n, a := range l.Agents {
		var r AgentRun
		if readJSONFile(l.runPath(n), &r) == nil && r.PID > 0 {
			a.PID = r.PID
		}
	}
}

// SupervisorAlive reports whether the lab's supervisor process runs.
func (l *Lab) SupervisorAlive() bool {
	return l.Supervisor != nil && isSupervisor(l.Supervisor.PID, l.Name)
}

// isSupervisor: pid is a live `segchain lab supervise --lab name`.
func isSupervisor(pid int, name string) bool {
	args := cmdline(pid)
	return len(args) > 3 && slices.Equal(args[1:3], []string{"lab", "supervise"}) && slices.Contains(args, name) &&
		slices.Contains(args, "--lab")
}

// cmdline is a live process's argv (nil: gone, a zombie, or changing
// image).
func cmdline(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// startSupervisor starts the lab's supervisor, detached (its own session,
// output to supervisor.log), and records its pid. self is the segchain
// binary.
func (l *Lab) startSupervisor(self string) error {
	if l.SupervisorAlive() {
		return nil
	}
	if err := os.MkdirAll(l.runDir(), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(l.supervisorLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "lab", "supervise", "--lab", l.Name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lab %s: start supervisor: %w", l.Name, err)
	}
	go cmd.Wait() // reaped if it exits while this process lives (tests)
	l.Supervisor = &SupervisorState{PID: cmd.Process.Pid, Exe: self, Log: l.supervisorLog()}
	return l.save()
}

// stopSupervisor stops the supervisor (SIGTERM: it stops its agents and
// exits; SIGKILL after 15 s) and waits until it is gone.
func (l *Lab) stopSupervisor() error {
	if l.Supervisor == nil {
		return nil
	}
	pid := l.Supervisor.PID
	if !isSupervisor(pid, l.Name) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("lab %s: stop supervisor pid %d: %w", l.Name, pid, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for isSupervisor(pid, l.Name) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// accepts: node's agent accepts TCP connections on its gRPC address
// (through the management bridge).
func (l *Lab) accepts(node string) bool {
	c, err := net.DialTimeout("tcp", l.Agents[node].Addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// canceled is an ended context.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// stillMine: the lab's state file exists and names this process as its
// supervisor (or names none yet: lab up records it after starting it).
func (l *Lab) stillMine() bool {
	cur, err := Get(l.Name)
	if err != nil {
		return !errors.Is(err, ErrNotFound)
	}
	return cur.Supervisor == nil || cur.Supervisor.PID == os.Getpid()
}

// supervised is one agent process the supervisor watches: its child
// (cmd), or one it adopted from a previous supervisor (cmd nil: watched
// through /proc).
type supervised struct {
	pid     int
	gen     int
	started time.Time
	done    chan struct{}
	exit    string
}

func (s *supervised) exited(l *Lab, node string) bool {
	if s.done != nil {
		select {
		case <-s.done:
			return true
		default:
			return false
		}
	}
	if !l.agentPIDAlive(node, s.pid) {
		s.exit = "exited (adopted process, status unknown)"
		return true
	}
	return false
}

// Supervise runs the lab's agents until ctx ends (SIGTERM to `segchain
// lab supervise`): it starts each one its want file says should run,
// restarts one that exits (BackoffMin doubling to BackoffMax), restarts
// at once one whose want generation changed, stops one that should not
// run, and records each agent's pid and state. When ctx ends it stops
// every agent (SIGTERM, SIGKILL after 5 s) and returns. Agents already
// running (a supervisor restarted) are adopted, not started twice.
func (l *Lab) Supervise(ctx context.Context, log io.Writer) error {
	if len(l.Agents) == 0 {
		return fmt.Errorf("lab %s has no agents to supervise", l.Name)
	}
	if err := os.MkdirAll(l.runDir(), 0o700); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
	nodes := l.NodeNames()
	kids := map[string]*supervised{}
	runs := map[string]*AgentRun{}
	backoff := map[string]time.Duration{}
	for _, n := range nodes {
		r := &AgentRun{State: AgentStopped, Since: time.Now()}
		var old AgentRun
		if readJSONFile(l.runPath(n), &old) == nil {
			r.Restarts, r.Gen = old.Restarts, old.Gen
			if old.PID > 0 && l.agentPIDAlive(n, old.PID) {
				kids[n] = &supervised{pid: old.PID, gen: old.Gen, started: old.Since}
				r.PID, r.State, r.Since = old.PID, AgentRunning, old.Since
				logf("node %s: adopted running agent pid %d", n, old.PID)
			}
		}
		runs[n] = r
	}
	wake := make(chan struct{}, 1)
	save := func(n string) {
		if err := writeAtomic(l.runPath(n), runs[n]); err != nil {
			logf("node %s: %v", n, err)
		}
	}
	for _, n := range nodes {
		save(n)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for round := 0; ; round++ {
		now := time.Now()
		starting := startingNow(runs, now)
		// A lab gone without lab down (state file removed, or another
		// supervisor recorded): this one stops, with its agents.
		if round%10 == 9 && !l.stillMine() {
			logf("lab %s is gone or has another supervisor: stopping", l.Name)
			ctx = canceled
		}
		for _, n := range nodes {
			want, r, k := l.Want(n), runs[n], kids[n]
			changed := false
			if k != nil && k.exited(l, n) {
				r.LastExit, r.PID = k.exit, 0
				kids[n], k = nil, nil
				changed = true
			}
			if k != nil && (!want.Run || want.Gen != k.gen) {
				logf("node %s: stopping agent pid %d (want run=%v gen %d, running gen %d)", n, k.pid, want.Run, want.Gen, k.gen)
				stopPID(k.pid, false, func() bool { return k.exited(l, n) })
				r.LastExit = k.exit
				kids[n], k = nil, nil
				r.PID, r.Since, r.State, r.NextStart = 0, now, AgentStopped, time.Time{}
				changed = true
			}
			switch {
			case k != nil:
				if r.State == AgentStarting && l.accepts(n) {
					r.State, changed = AgentRunning, true
					starting--
					logf("node %s: agent pid %d accepts connections", n, k.pid)
				}
			case !want.Run:
				if r.State != AgentStopped {
					r.State, r.NextStart, changed = AgentStopped, time.Time{}, true
				}
			case r.State == AgentRunning || r.State == AgentStarting: // it just exited: back off
				b := backoff[n]
				if b == 0 || now.Sub(r.Since) >= BackoffReset {
					b = BackoffMin
				}
				backoff[n] = min(2*b, BackoffMax)
				r.State, r.NextStart, r.Since, changed = AgentBackoff, now.Add(b), now, true
				r.Restarts++
				logf("node %s: agent exited (%s); restart %d in %v", n, r.LastExit, r.Restarts, b)
			case starting >= MaxStarting:
				// Others are still starting: this one waits its turn.
			case want.Gen != r.Gen || r.State == AgentStopped || !now.Before(r.NextStart):
				if want.Gen != r.Gen {
					backoff[n] = 0 // an explicit (re)start
				}
				nk, err := l.spawnSupervised(want, n, wake)
				if err != nil {
					logf("node %s: start agent: %v", n, err)
					b := max(backoff[n], BackoffMin)
					backoff[n] = min(2*b, BackoffMax)
					r.State, r.NextStart, r.LastExit, r.Gen = AgentBackoff, now.Add(b), err.Error(), want.Gen
				} else {
					kids[n] = nk
					starting++
					r.PID, r.State, r.Gen, r.Since, r.NextStart = nk.pid, AgentStarting, want.Gen, now, time.Time{}
					logf("node %s: started agent pid %d (gen %d)", n, nk.pid, want.Gen)
				}
				changed = true
			}
			if changed {
				save(n)
			}
		}
		select {
		case <-ctx.Done():
			for _, n := range nodes {
				if k := kids[n]; k != nil {
					logf("node %s: stopping agent pid %d (supervisor stopping)", n, k.pid)
					stopPID(k.pid, false, func() bool { return k.exited(l, n) })
					runs[n].PID, runs[n].State, runs[n].Since, runs[n].LastExit = 0, AgentStopped, time.Now(), k.exit
					save(n)
				}
			}
			logf("supervisor stopped")
			return nil
		case <-tick.C:
		case <-wake:
		}
	}
}

// spawnSupervised starts node's agent as want says, as a child of the
// supervisor; wake is signalled when it exits.
func (l *Lab) spawnSupervised(want AgentWant, node string, wake chan<- struct{}) (*supervised, error) {
	exe := want.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd, logf, err := l.agentCmd(exe, node, want.Extra...)
	if err != nil {
		return nil, err
	}
	err = cmd.Start()
	logf.Close() // the child has its own copy
	if err != nil {
		return nil, err
	}
	s := &supervised{pid: cmd.Process.Pid, gen: want.Gen, started: time.Now(), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		s.exit = "exit status 0"
		if err != nil {
			s.exit = err.Error()
		}
		close(s.done)
		select {
		case wake <- struct{}{}:
		default:
		}
	}()
	return s, nil
}

// stopPID stops a process: SIGTERM (SIGKILL when force), SIGKILL after 5 s;
// gone reports when it has exited.
func stopPID(pid int, force bool, gone func() bool) {
	sig := syscall.SIGTERM
	if force {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(5 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// strayAgents are the live processes that are a segchain agent of one of
// the lab's nodes, whoever started them (the supervisor, StartAgent, or
// someone by hand): `agent` with the lab's --node and --netns, or running
// in one of the lab's namespaces.
func (l *Lab) strayAgents() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	nsIno := map[uint64]bool{}
	for _, ns := range l.Nodes {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", ns), &st) == nil {
			nsIno[st.Ino] = true
		}
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		args := cmdline(pid)
		if !slices.Contains(args, "agent") {
			continue
		}
		mine := false
		for n := range l.Nodes {
			if l.isAgentOf(args, n) {
				mine = true
			}
		}
		var st syscall.Stat_t
		if !mine && syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && nsIno[st.Ino] {
			mine = true
		}
		if mine {
			out = append(out, pid)
		}
	}
	return out
}

// isAgentOf: argv is `X agent ... --node node ... --netns NS` of this lab.
func (l *Lab) isAgentOf(args []string, node string) bool {
	if len(args) < 2 || args[1] != "agent" {
		return false
	}
	want := map[string]bool{}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--node" || args[i] == "--netns" {
			want[args[i]+"="+args[i+1]] = true
		}
	}
	return want["--node="+node] && want["--netns="+l.Nodes[node]]
}

// agentPIDAlive: pid is a live segchain agent of this lab's node (a
// recycled pid is someone else's process). An agent re-executes itself
// inside its namespace as it starts: while the kernel replaces its image
// its cmdline reads empty, which is taken as alive when /proc has it.
func (l *Lab) agentPIDAlive(node string, pid int) bool {
	if pid <= 0 {
		return false
	}
	args := cmdline(pid)
	if args == nil {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		return len(f) > 2 && f[2] != "Z" && f[2] != "X"
	}
	return l.isAgentOf(args, node)
}

// RestartAgents (re)starts the agents of nodes (every node when none),
// through the supervisor, which is started first when it does not run
// (self: the segchain binary; exe: the agent program, "" for the one
// recorded), and waits until each answers.
func (l *Lab) RestartAgents(self, exe string, nodes ...string) error {
	if len(l.Agents) == 0 {
		return fmt.Errorf("lab %s runs no agents (lab up --agents)", l.Name)
	}
	if len(nodes) == 0 {
		nodes = l.NodeNames()
	}
	for _, n := range nodes {
		if l.Agents[n] == nil {
			return fmt.Errorf("lab %s: node %s has no agent (nodes: %s)", l.Name, n, strings.Join(l.NodeNames(), ", "))
		}
	}
	var errs []error
	for _, n := range nodes {
		w := l.Want(n)
		if exe != "" {
			w.Exe = exe
		}
		errs = append(errs, l.startAgent(self, w.Exe, n, w.Extra))
	}
	return errors.Join(errs...)
}

package frr

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Bin is where Debian's frr package installs the daemons.
var Bin = "/usr/lib/frr"

// ErrNotInstalled: FRR's daemons are missing (apt-get install frr).
var ErrNotInstalled = errors.New("FRR is not installed (apt-get install frr; scripts/deps.sh installs it)")

// Installed reports whether zebra and bgpd exist.
func Installed() error {
	for _, d := range []string{"zebra", "bgpd"} {
		if _, err := os.Stat(filepath.Join(Bin, d)); err != nil {
			return ErrNotInstalled
		}
	}
	return nil
}

// Daemons are the daemons a configuration starts, in start order.
func (c Config) Daemons() []string {
	d := []string{"zebra", "bgpd"}
	if c.BFDD != "" {
		d = append(d, "bfdd")
	}
	return d
}

// Start runs one FRR instance for namespace netns with configuration c:
// every file of it (configurations, pid files, the zebra API socket, the
// vty sockets, logs) lives in dir, nothing under /etc/frr or /var/run/frr,
// so instances of several labs and a system FRR never meet. The daemons
// drop privileges to the frr user (FRR refuses root's vty group). It
// returns once every daemon has written its pid file and vty socket; on
// failure it stops what it started.
func Start(netns, dir string, c Config) error {
	if err := Installed(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{"zebra": c.Zebra, "bgpd": c.BGPD, "bfdd": c.BFDD}
	for d, conf := range files {
		// A daemon this configuration does not run keeps no file from an
		// earlier one (Running reads them back).
		if err := os.Remove(filepath.Join(dir, d+".conf")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if conf == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, d+".conf"), []byte(conf), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "frr.conf"), []byte(c.Integrated()), 0o644); err != nil {
		return err
	}
	if err := chownFRR(dir); err != nil {
		return err
	}
	for _, d := range c.Daemons() {
		if err := startDaemon(netns, dir, d); err != nil {
			return errors.Join(err, Stop(dir))
		}
	}
	return nil
}

func chownFRR(dir string) error {
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("FRR's user: %w (%w)", err, ErrNotInstalled)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func startDaemon(netns, dir, d string) error {
	args := []string{"netns", "exec", netns, filepath.Join(Bin, d), "-d",
		"-f", filepath.Join(dir, d+".conf"), "-i", pidFile(dir, d),
		"-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir,
		"-u", "frr", "-g", "frr", "-P", "0", "--log", "file:" + filepath.Join(dir, d+".log")}
	if d == "bfdd" {
		args = append(args, "--bfdctl", filepath.Join(dir, "bfdd.sock"))
	}
	cmd := exec.Command("ip", args...)
	out, err := cmd.CombinedOutput() // -d: returns once the daemon forked
	if err != nil {
		return fmt.Errorf("start %s in %s: %w: %s", d, netns, err, strings.TrimSpace(string(out)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pid, _ := readPid(dir, d)
		_, serr := os.Stat(filepath.Join(dir, d+".vty"))
		if pid > 0 && serr == nil && alive(pid, dir) {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, d+".log"))
			return fmt.Errorf("%s in %s did not come up in 10s (log: %s)", d, netns, lastLines(string(log), 5))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

func pidFile(dir, d string) string { return filepath.Join(dir, d+".pid") }

func readPid(dir, d string) (int, error) {
	b, err := os.ReadFile(pidFile(dir, d))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// alive: pid is a live FRR daemon of the instance in dir (its command
// line names dir's pid file; a recycled pid is someone else's process).
func alive(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return false
		}
	}
	return strings.Contains(string(b), dir+"/")
}

// exiting: pid is past its command line (empty while the process exits)
// but not yet a zombie, and may still hold its pid file's lock: a daemon
// started on the same files now would find it locked.
func exiting(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) > 0 {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// PIDs returns the live daemons of the instance in dir, by daemon name.
func PIDs(dir string) map[string]int {
	out := map[string]int{}
	for _, d := range []string{"zebra", "bgpd", "bfdd"} {
		if pid, err := readPid(dir, d); err == nil && alive(pid, dir) {
			out[d] = pid
		}
	}
	return out
}

// Stop stops the instance in dir (SIGTERM, SIGKILL after 5 s), daemons in
// reverse start order, and waits until each is gone. It signals only
// processes whose command line names dir.
func Stop(dir string) error {
	var errs []error
	for _, d := range []string{"bfdd", "bgpd", "zebra"} {
		pid, err := readPid(dir, d)
		if err != nil || !alive(pid, dir) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", d, pid, err))
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid, dir) || exiting(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				deadline = time.Now().Add(5 * time.Second)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// Running returns the configuration the instance in dir was started with,
// if every daemon of it is alive.
func Running(dir string) (Config, bool) {
	read := func(d string) string {
		b, _ := os.ReadFile(filepath.Join(dir, d+".conf"))
		return string(b)
	}
	c := Config{Zebra: read("zebra"), BGPD: read("bgpd"), BFDD: read("bfdd")}
	if c.Zebra == "" || c.BGPD == "" {
		return c, false
	}
	pids := PIDs(dir)
	for _, d := range c.Daemons() {
		if pids[d] == 0 {
			return c, false
		}
	}
	return c, true
}

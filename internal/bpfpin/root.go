package bpfpin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// fsPath is where bpffs is mounted by convention (systemd, iproute2,
// Cilium all use it).
const fsPath = "/sys/fs/bpf"

// ErrNoPersistentFS is returned by Root when no bpffs that outlives the
// process can be reached: pinning anyway would look like success and lose
// every program and map when the command exits.
var ErrNoPersistentFS = errors.New("no persistent bpffs")

// Root returns the directory segchain pins under: <bpffs>/segchain on the
// host's bpffs, however segchain is invoked. Every user of pinned state
// (proxy, firewall, tests) goes through it.
//
// `ip netns exec` runs the command in a private mount namespace with a
// fresh /sys, so /sys/fs/bpf there is an empty sysfs directory, and a bpffs
// mounted on it would die with the command. In that case Root reaches the
// host's bpffs through /proc/<pid>/root/sys/fs/bpf of PID 1 or, where PID 1
// is not accessible, of the outermost ancestor process in another mount
// namespace (BPF_OBJ_PIN and BPF_OBJ_GET resolve paths through that magic
// link, so the pins land in the host's bpffs and persist). A bpffs is
// mounted only on the caller's own /sys/fs/bpf, and only when the caller
// is known to be in the host's mount namespace; otherwise Root fails with
// ErrNoPersistentFS.
func Root() (string, error) {
	if r, ok := heldRoot(); ok {
		return filepath.Join(r, "segchain"), nil // hold.go
	}
	fs, err := hostFS()
	if err != nil {
		return "", err
	}
	return filepath.Join(fs, "segchain"), nil
}

// found is the last bpffs hostFS found, and from which mount namespace:
// an agent observing its node asks for Root several times per
// observation, and the search (PID 1's and every ancestor's namespace,
// statfs and stat of each) was a quarter of its CPU (docs/scale.md).
// It is reused while this process stays in that namespace and the
// directory is still a bpffs.
var found struct {
	sync.Mutex
	ns, dir string
}

// hostFS finds the host's bpffs (see Root).
func hostFS() (string, error) {
	held.Lock()
	held.lookups++
	held.Unlock()
	self, err := mountNS("self")
	if err != nil {
		return "", fmt.Errorf("identify mount namespace: %w", err)
	}
	found.Lock()
	ns, dir := found.ns, found.dir
	found.Unlock()
	if ns == self && dir != "" && isBPFFS(dir) {
		return dir, nil
	}
	dir, err = searchFS(self)
	if err == nil {
		found.Lock()
		found.ns, found.dir = self, dir
		found.Unlock()
	}
	return dir, err
}

// searchFS finds the host's bpffs from mount namespace self.
func searchFS(self string) (string, error) {
	// home: this process is in the host's mount namespace, so what it
	// mounts persists. Proven by PID 1's namespace, or, when PID 1 cannot
	// be inspected, by no ancestor living in another one.
	home := true
	for _, pid := range outerFirst() {
		ns, err := mountNS(strconv.Itoa(pid))
		if err != nil {
			continue // not inspectable (hidepid, LSM): ask the next one
		}
		if ns == self {
			if pid == 1 {
				break
			}
			continue
		}
		home = false
		dir := fmt.Sprintf("/proc/%d/root%s", pid, fsPath)
		if isBPFFS(dir) {
			if isBPFFS(fsPath) && sameFS(dir, fsPath) {
				return fsPath, nil // the host's bpffs is visible here too
			}
			return dir, nil
		}
		if pid == 1 {
			return "", fmt.Errorf("%w: the host's %s (PID 1's) is not a bpffs and this process runs in another mount namespace (ip netns exec?), where a mount would die with it; mount it on the host: mount -t bpf bpf %s", ErrNoPersistentFS, fsPath, fsPath)
		}
	}
	if isBPFFS(fsPath) {
		if home {
			return fsPath, nil
		}
		return "", fmt.Errorf("%w: %s is a bpffs private to this mount namespace and no host bpffs is reachable; mount bpffs on the host: mount -t bpf bpf %s", ErrNoPersistentFS, fsPath, fsPath)
	}
	if !home {
		return "", fmt.Errorf("%w: this process runs in a private mount namespace (ip netns exec?) and no host bpffs is reachable through /proc/<pid>/root; mount bpffs on the host (mount -t bpf bpf %s) or use --netns instead of ip netns exec", ErrNoPersistentFS, fsPath)
	}
	if err := unix.Mount("bpf", fsPath, "bpf", 0, "mode=0700"); err != nil {
		return "", fmt.Errorf("mount bpffs on %s: %w", fsPath, err)
	}
	return fsPath, nil
}

// outerFirst lists PID 1, then the ancestors of this process from the
// outermost to the parent.
func outerFirst() []int {
	var chain []int
	for pid := os.Getppid(); pid > 1 && len(chain) < 64; pid = parentOf(pid) {
		chain = append(chain, pid)
	}
	out := []int{1}
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i])
	}
	return out
}

// parentOf reads the parent pid from /proc/<pid>/stat (0 when unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// mountNS is the mount namespace of /proc/<pid> ("self" for this process).
func mountNS(pid string) (string, error) {
	return os.Readlink("/proc/" + pid + "/ns/mnt")
}

func isBPFFS(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return uint32(st.Type) == uint32(unix.BPF_FS_MAGIC) // Type is int32 on 32-bit targets
}

// sameFS reports whether a and b are on the same filesystem instance.
func sameFS(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return false
	}
	return fa.Sys().(*syscall.Stat_t).Dev == fb.Sys().(*syscall.Stat_t).Dev
}

package daemon

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"

	"github.com/segchain/segchain/internal/nsutil"
)

// agentNetnsEnv marks an agent that has re-executed itself inside its
// node's namespace.
const agentNetnsEnv = "SEGCHAIN_AGENT_IN_NETNS"

// enterNetns makes the whole agent process live in namespace name: it
// re-executes itself from a thread inside it, so every thread of the new
// image starts there. The BGP speaker (GoBGP) opens and dials its sockets
// from goroutines of its own on any thread; only a process wholly inside
// the namespace gives them the node's addresses. The pid and the command
// line stay the same (lab down and the lab's liveness checks rely on
// them). Everything else keeps working as before: the agent still names
// the namespace explicitly for every netlink and sysctl access.
func enterNetns(name string) error {
	if name == "" || os.Getenv(agentNetnsEnv) == name {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("re-exec in netns %s: %w", name, err)
	}
	target, err := netns.GetFromPath(nsutil.Path(name))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread() // never unlocked: the thread is replaced by exec or the error ends the agent
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter netns %s: %w", name, err)
	}
	env := append(os.Environ(), agentNetnsEnv+"="+name)
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("re-exec in netns %s: %w", name, err)
	}
	return nil
}

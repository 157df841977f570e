package bpfpin

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/segchain/segchain/internal/nsutil"
)

// A long-lived process (the agent) names the same namespaces on every
// request: Namespace enters each one (two setns, a socket) for its
// cookie, once per eBPF kind observed — 8 % of an agent's CPU in a no-op
// apply (docs/scale.md). Keep identifies a namespace once and holds it
// open; Namespace then answers from that while the namespace's path still
// leads to the same namespace. An open namespace cannot be freed, so its
// inode cannot be given to another namespace: the path's inode (stat, no
// setns) equal to the kept one means the same namespace. Holding it open
// keeps a deleted namespace alive until released, which the agent's own
// sockets in it already do.

type keptNS struct {
	name     string
	ino, dev uint64
	f        *os.File
}

var (
	keptMu sync.Mutex
	kept   = map[string]*keptNS{}
	// keptHits counts the Namespace calls answered from a kept identity
	// (tests).
	keptHits uint64
)

// Keep keeps netns's identity until release is called ("": nothing to
// keep, the calling thread's namespace).
func Keep(netns string) (release func(), err error) {
	if netns == "" {
		return func() {}, nil
	}
	f, err := os.Open(nsutil.Path(netns))
	if err != nil {
		return nil, fmt.Errorf("keep netns %q: %w", netns, err)
	}
	name, ino, err := Namespace(netns)
	if err != nil {
		f.Close()
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Ino != ino {
		f.Close()
		return nil, fmt.Errorf("keep netns %q: it changed while being identified", netns)
	}
	k := &keptNS{name: name, ino: ino, dev: st.Dev, f: f}
	keptMu.Lock()
	if old := kept[netns]; old != nil {
		old.f.Close()
	}
	kept[netns] = k
	keptMu.Unlock()
	return func() {
		keptMu.Lock()
		if kept[netns] == k {
			delete(kept, netns)
		}
		keptMu.Unlock()
		k.f.Close()
	}, nil
}

// keptName is netns's kept identity, if kept and its path still leads to
// it.
func keptName(netns string) (string, uint64, bool) {
	keptMu.Lock()
	k := kept[netns]
	keptMu.Unlock()
	if k == nil {
		return "", 0, false
	}
	var st syscall.Stat_t
	if err := syscall.Stat(nsutil.Path(netns), &st); err != nil || st.Ino != k.ino || st.Dev != k.dev {
		return "", 0, false
	}
	keptMu.Lock()
	keptHits++
	keptMu.Unlock()
	return k.name, k.ino, true
}

// KeptHits is how many times Namespace answered from a kept identity.
func KeptHits() uint64 {
	keptMu.Lock()
	defer keptMu.Unlock()
	return keptHits
}

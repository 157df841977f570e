package bpfpin

import "sync"

// One observation (an agent's answer to one request) names the pin root
// and the node's namespace once per eBPF kind and check: ten times
// each, a readlink and a statfs for the root, a stat for a kept
// namespace, 6 % of an agent's CPU in a no-op apply (docs/scale.md,
// session 13). Hold resolves both once at the start of an observation;
// until it is released, Root and Namespace(netns) answer from what was
// resolved then. Overlapping holds (an agent serving several nodes) each
// resolve the root afresh and the newest answers, so a caller is never
// answered from a resolution older than its own hold.

type heldNS struct {
	name string
	ino  uint64
	n    int
}

var held struct {
	sync.Mutex
	n    int
	root string // "" while nothing holds it or its resolution failed
	ns   map[string]*heldNS
	// lookups counts the root's resolutions (hostFS) and hits the
	// answers from a hold (tests).
	lookups, hits uint64
}

// Hold resolves Root and Namespace(netns) for the observation that
// follows, until release. A resolution that fails is not held: the
// calls then resolve (and fail) on their own.
func Hold(netns string) (release func()) {
	root, rerr := hostFS()
	name, ino, nerr := Namespace(netns)
	held.Lock()
	held.n++
	if rerr == nil {
		held.root = root
	}
	var e *heldNS
	if nerr == nil {
		if held.ns == nil {
			held.ns = map[string]*heldNS{}
		}
		if e = held.ns[netns]; e == nil {
			e = &heldNS{}
			held.ns[netns] = e
		}
		e.name, e.ino = name, ino
		e.n++
	}
	held.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			defer held.Unlock()
			if held.n--; held.n == 0 {
				held.root = ""
			}
			if e != nil {
				if e.n--; e.n == 0 && held.ns[netns] == e {
					delete(held.ns, netns)
				}
			}
		})
	}
}

func heldRoot() (string, bool) {
	held.Lock()
	defer held.Unlock()
	if held.n == 0 || held.root == "" {
		return "", false
	}
	held.hits++
	return held.root, true
}

func heldName(netns string) (string, uint64, bool) {
	held.Lock()
	defer held.Unlock()
	e := held.ns[netns]
	if e == nil {
		return "", 0, false
	}
	held.hits++
	return e.name, e.ino, true
}

// HoldStats are the root's resolutions and the answers from a hold so
// far (tests).
func HoldStats() (lookups, hits uint64) {
	held.Lock()
	defer held.Unlock()
	return held.lookups, held.hits
}

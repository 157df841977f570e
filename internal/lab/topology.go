package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// DefaultName is the lab name used when none is given.
const DefaultName = "default"

// Topology is a lab to bring up: nodes (one namespace each) joined by
// point-to-point links (veth pairs).
type Topology struct {
	// Name is the lab name, [a-z0-9-]{1,16}; empty means DefaultName.
	Name  string
	Nodes []Node
	Links []Link
	// File is the domain file the topology came from, recorded in the
	// state file for `lab ls`. Optional.
	File string
}

// Node is one network namespace.
type Node struct {
	Name string
	// Router enables IPv4 and IPv6 forwarding.
	Router bool
	// NoSRv6 turns SRv6 processing off (seg6_enabled 0 on all, default,
	// lo and every interface): an SR-unaware service function, whose
	// kernel must drop an SRH addressed to it, not act on it.
	NoSRv6 bool
	// Sysctls are extra settings, keyed like sysctl(8) ("net.ipv6.conf.all.
	// seg6_require_hmac") or as a /proc/sys relative path. They are applied
	// last, after all interfaces exist, so they may name interfaces.
	Sysctls map[string]string
}

// Link is a veth pair between two endpoints.
type Link struct {
	A, B Endpoint
	// MTU of both ends; 0 keeps the veth default (1500).
	MTU int
}

// Endpoint is one end of a link: an interface in a node with its addresses
// (IPv6 and/or IPv4, with prefix length).
type Endpoint struct {
	Node, Iface string
	Addrs       []netip.Prefix
}

func (e Endpoint) String() string { return e.Node + ":" + e.Iface }

var (
	labNameRE  = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)
	nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)
)

// NetnsName is the namespace name of a node of a lab: sc-<lab>-<node>.
func NetnsName(lab, node string) string { return "sc-" + lab + "-" + node }

// labName returns the effective lab name of t.
func (t Topology) labName() string {
	if t.Name == "" {
		return DefaultName
	}
	return t.Name
}

// Validate checks names, references and addresses and reports every
// problem found, each prefixed with its path (nodes[1].name, links[0].b.iface).
func (t Topology) Validate() error {
	var errs []error
	add := func(path, f string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(f, a...)))
	}
	if !labNameRE.MatchString(t.labName()) {
		add("name", "lab name %q must match [a-z0-9-]{1,16}", t.Name)
	}
	nodes := map[string]bool{}
	for i, n := range t.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		switch {
		case !nodeNameRE.MatchString(n.Name):
			add(p+".name", "node name %q must match [A-Za-z0-9][A-Za-z0-9_.-]{0,31}", n.Name)
		case nodes[n.Name]:
			add(p+".name", "duplicate node %q", n.Name)
		}
		nodes[n.Name] = true
		for k := range n.Sysctls {
			if _, err := sysctlPath(k); err != nil {
				add(p+".sysctls", "%v", err)
			}
		}
	}
	ifaces := map[string]bool{} // node:iface
	for i, l := range t.Links {
		for side, e := range []Endpoint{l.A, l.B} {
			p := fmt.Sprintf("links[%d].%s", i, [2]string{"a", "b"}[side])
			if !nodes[e.Node] {
				add(p+".node", "unknown node %q", e.Node)
			}
			if err := checkIfaceName(e.Iface); err != nil {
				add(p+".iface", "%v", err)
			} else if ifaces[e.String()] {
				add(p+".iface", "duplicate interface %s", e)
			}
			ifaces[e.String()] = true
			for j, a := range e.Addrs {
				if !a.IsValid() {
					add(fmt.Sprintf("%s.addrs[%d]", p, j), "invalid prefix")
				}
			}
		}
	}
	return errors.Join(errs...)
}

// checkIfaceName applies the kernel's rules (dev_valid_name): 1–15 bytes,
// no '/', ':' or whitespace, not "." or "..".
func checkIfaceName(s string) error {
	if s == "" || len(s) > 15 || s == "." || s == ".." ||
		strings.ContainsAny(s, "/: \t\n") {
		return fmt.Errorf("invalid interface name %q (1-15 chars, no '/', ':' or spaces)", s)
	}
	return nil
}

// sysctlPath maps a sysctl(8) key or /proc/sys relative path under net/ to
// its /proc/sys file.
func sysctlPath(key string) (string, error) {
	p := key
	if !strings.Contains(p, "/") {
		p = strings.ReplaceAll(p, ".", "/")
	}
	p = strings.TrimPrefix(p, "/proc/sys/")
	if !strings.HasPrefix(p, "net/") || strings.Contains(p, "..") {
		return "", fmt.Errorf("sysctl %q: only net.* settings are allowed", key)
	}
	return "/proc/sys/" + p, nil
}

package config

import (
	"net"
	"path/filepath"
	"strconv"
)

// agents checks nodes.*.agent (HOST:PORT) and that security.pki names
// the controller's TLS files when any node has an agent.
func (v *validator) agents() {
	var first string
	for _, name := range v.inFileOrder("nodes.", v.d.NodeNames()) {
		n := v.d.Nodes[name]
		if n == nil || n.Agent == "" {
			continue
		}
		p := "nodes." + name + ".agent"
		if first == "" {
			first = p
		}
		host, port, err := net.SplitHostPort(n.Agent)
		if err != nil || host == "" {
			v.errf(p, "%q: want HOST:PORT ([IPv6]:PORT for an IPv6 address)", n.Agent)
			continue
		}
		if pn, err := strconv.Atoi(port); err != nil || pn < 1 || pn > 65535 {
			v.errf(p, "%q: port %q not in 1..65535", n.Agent, port)
		}
		if n.Netns != "" {
			v.errf(p, "a node is reached through its agent or is the namespace nodes.%s.netns, not both", name)
		}
	}
	k := v.d.Security.PKI
	switch {
	case k == nil && first != "":
		v.errf("security.pki", "required: %s is an agent, reached over mutual TLS (ca, cert, key; segchain pki)", first)
	case k != nil:
		for _, f := range []struct{ key, val string }{{"ca", k.CA}, {"cert", k.Cert}, {"key", k.Key}} {
			if f.val == "" {
				v.errf("security.pki."+f.key, "required")
			}
		}
	}
}

// PKIFiles returns security.pki's files resolved against the domain
// file's directory (ca, cert, key; empty when not set).
func (d *Domain) PKIFiles() (ca, cert, key string) {
	k := d.Security.PKI
	if k == nil {
		return "", "", ""
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(d.Dir, p)
	}
	return abs(k.CA), abs(k.Cert), abs(k.Key)
}

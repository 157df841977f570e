package frr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/nodestate"
)

// Sessions asks the instance in dir (namespace netns) for its IPv6
// unicast sessions (vtysh: show bgp ipv6 unicast summary json), named after
// intent's neighbors.
func Sessions(netns, dir string, intent *nodestate.BGP) ([]nodestate.BGPSession, error) {
	out, err := exec.Command("ip", "netns", "exec", netns, "vtysh", "--vty_socket", dir,
		"-c", "show bgp ipv6 unicast summary json").Output()
	if err != nil {
		return nil, fmt.Errorf("vtysh in %s: %w", netns, err)
	}
	ss, err := parseSummary(out, intent)
	if err != nil {
		return nil, err
	}
	bfd := false
	if intent != nil { // nil: the sessions as FRR names them
		for _, n := range intent.Neighbors {
			bfd = bfd || n.BFD
		}
	}
	if !bfd {
		return ss, nil
	}
	out, err = exec.Command("ip", "netns", "exec", netns, "vtysh", "--vty_socket", dir,
		"-c", "show bfd peers json").Output()
	if err != nil {
		return nil, fmt.Errorf("vtysh in %s: %w", netns, err)
	}
	st, err := parseBFDPeers(out)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		if n, ok := intent.Neighbor(ss[i].Peer); ok && n.BFD {
			ss[i].BFD = st[ss[i].Peer]
			if ss[i].BFD == "" {
				ss[i].BFD = "down" // bfdd has not made the session yet
			}
		}
	}
	return ss, nil
}

// parseBFDPeers reads show bfd peers json: each peer's status (up, down,
// init, shutdown → admin-down), by address.
func parseBFDPeers(out []byte) (map[netip.Addr]string, error) {
	if i := strings.IndexByte(string(out), '['); i > 0 {
		out = out[i:]
	}
	var ps []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("vtysh bfd peers: %w", err)
	}
	m := map[netip.Addr]string{}
	for _, p := range ps {
		a, err := netip.ParseAddr(p.Peer)
		if err != nil {
			continue
		}
		st := p.Status
		if st == "shutdown" {
			st = "admin-down"
		}
		m[a] = st
	}
	return m, nil
}

func parseSummary(out []byte, intent *nodestate.BGP) ([]nodestate.BGPSession, error) {
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	type summary struct {
		Peers map[string]struct {
			RemoteAs       uint32 `json:"remoteAs"`
			State          string `json:"state"`
			PfxRcd         uint64 `json:"pfxRcd"`
			PeerUptimeMsec int64  `json:"peerUptimeMsec"`
		} `json:"peers"`
	}
	var v struct {
		summary
		// Some versions nest the summary under the address family.
		IPv6Unicast *summary `json:"ipv6Unicast"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("vtysh summary: %w", err)
	}
	if v.IPv6Unicast != nil {
		v.summary = *v.IPv6Unicast
	}
	var ss []nodestate.BGPSession
	for addr, p := range v.Peers {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			continue
		}
		n, _ := intent.Neighbor(a)
		s := nodestate.BGPSession{Node: n.Node, Peer: a, ASN: p.RemoteAs, Dev: n.Dev,
			State: strings.ToLower(p.State), Received: p.PfxRcd, Accepted: p.PfxRcd}
		if s.Established() {
			s.Since = p.PeerUptimeMsec / 1000
		}
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].Peer.Less(ss[j].Peer) })
	return ss, nil
}

// RetryNow asks the instance in dir to dial each of peers now whose
// session waits (active: a connection refused or reset, the next attempt
// at the connect timer's end; idle: waiting to start, its start timer
// perhaps backed off), with `clear bgp PEER`: FRR resets the neighbour,
// which starts it again within about a second. A session established or
// being opened (connect: dialling; opensent, openconfirm) is left alone,
// so a peer named twice, or whose session came up meanwhile, is not
// reset. It returns the peers it asked for. It talks to bgpd's vty
// socket in dir itself (vtysh's protocol: no process started, no
// namespace entered: on a loaded host a vtysh per router cost seconds).
func RetryNow(dir string, intent *nodestate.BGP, peers []netip.Addr) ([]netip.Addr, error) {
	v, err := dialVty(filepath.Join(dir, "bgpd.vty"))
	if err != nil {
		return nil, err
	}
	defer v.Close()
	if _, err := v.run("enable"); err != nil {
		return nil, err
	}
	out, err := v.run("show bgp ipv6 unicast summary json")
	if err != nil {
		return nil, err
	}
	ss, err := parseSummary(out, intent)
	if err != nil {
		return nil, err
	}
	state := map[netip.Addr]string{}
	for _, s := range ss {
		state[s.Peer] = s.State
	}
	var asked []netip.Addr
	for _, p := range peers {
		switch state[p] {
		case "idle", "active":
			if _, err := v.run("clear bgp " + p.String()); err != nil {
				return asked, err
			}
			asked = append(asked, p)
		}
	}
	return asked, nil
}

// vty is a connection to an FRR daemon's vty socket, spoken as vtysh
// speaks it: a command ends with a NUL; the answer is the command's
// output, three NULs and the command's status (0: success).
type vty struct {
	c    net.Conn
	path string
}

func dialVty(path string) (*vty, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("vty %s: %w", path, err)
	}
	return &vty{c: c, path: path}, nil
}

func (v *vty) Close() error { return v.c.Close() }

// run runs cmd and returns its output; a status other than 0 is an error
// with the output as its text.
func (v *vty) run(cmd string) ([]byte, error) {
	if err := v.c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := v.c.Write(append([]byte(cmd), 0)); err != nil {
		return nil, fmt.Errorf("vty %s: %s: %w", v.path, cmd, err)
	}
	var out []byte
	buf := make([]byte, 16384)
	for {
		n, err := v.c.Read(buf)
		out = append(out, buf[:n]...)
		if k := len(out); k >= 4 && out[k-4] == 0 && out[k-3] == 0 && out[k-2] == 0 {
			if st := out[k-1]; st != 0 {
				return nil, fmt.Errorf("vty %s: %s: status %d: %s", v.path, cmd, st, bytes.TrimSpace(out[:k-4]))
			}
			return out[:k-4], nil
		}
		if err != nil {
			return nil, fmt.Errorf("vty %s: %s: %w", v.path, cmd, err)
		}
	}
}

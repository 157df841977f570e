package frr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"

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
// being opened (connect: dialling; opensent, openconfirm) is left alone, so a peer named twice, or
// whose session came up meanwhile, is not reset. It returns the peers it
// asked for. vtysh only talks to the daemons' vty sockets in dir: no
// namespace is entered.
//
// With fresh, the peers' speakers have just started (nothing listened
// there before, so no session can be open): each is cleared without
// asking FRR for the sessions' states first (one vtysh instead of two).
func RetryNow(dir string, intent *nodestate.BGP, peers []netip.Addr, fresh bool) ([]netip.Addr, error) {
	state := map[netip.Addr]string{}
	if !fresh {
		out, err := exec.Command("vtysh", "--vty_socket", dir, "-c", "show bgp ipv6 unicast summary json").Output()
		if err != nil {
			return nil, fmt.Errorf("vtysh %s: %w", dir, err)
		}
		ss, err := parseSummary(out, intent)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			state[s.Peer] = s.State
		}
	}
	var args []string
	var asked []netip.Addr
	for _, p := range peers {
		switch {
		case fresh, state[p] == "idle", state[p] == "active":
			args = append(args, "-c", "clear bgp "+p.String())
			asked = append(asked, p)
		}
	}
	if len(args) == 0 {
		return nil, nil
	}
	if out, err := exec.Command("vtysh", append([]string{"--vty_socket", dir}, args...)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("vtysh %s: clear bgp: %w: %s", dir, err, bytes.TrimSpace(out))
	}
	return asked, nil
}

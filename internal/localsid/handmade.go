package localsid

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
)

// HandMadeDir holds the ownership records of the eBPF SIDs (SR proxies,
// End.AN.FW) made by hand with segchain sid add: unlike seg6local routes,
// they carry no route protocol that tells them from the domain's. One file
// per network namespace, named after the namespace's identity (device and
// inode of its nsfs file), so that `ip netns exec NS segchain sid add` and
// `segchain sid --netns NS add` agree.
const HandMadeDir = "/run/segchain/handmade"

// handMadePath returns the record file of netns ("" = the current one).
func handMadePath(dir, netns string) (string, error) {
	p := "/proc/self/ns/net"
	if netns != "" {
		p = filepath.Join("/run/netns", filepath.Base(netns))
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("identify netns %q: %w", netns, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("identify netns %q: no inode", netns)
	}
	return filepath.Join(dir, fmt.Sprintf("%d-%d.json", st.Dev, st.Ino)), nil
}

// HandMade returns the hand-made eBPF SIDs of netns, SID → behaviour.
func HandMade(netns string) (map[netip.Prefix]string, error) {
	return readHandMade(HandMadeDir, netns)
}

func readHandMade(dir, netns string) (map[netip.Prefix]string, error) {
	m := map[netip.Prefix]string{}
	p, err := handMadePath(dir, netns)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// MarkHandMade records sid (behaviour b) as made by hand in netns; b ""
// removes the record.
func MarkHandMade(netns string, sid netip.Prefix, b string) error {
	return markHandMade(HandMadeDir, netns, sid, b)
}

func markHandMade(dir, netns string, sid netip.Prefix, b string) error {
	m, err := readHandMade(dir, netns)
	if err != nil {
		return err
	}
	if b == "" {
		delete(m, sid)
	} else {
		m[sid] = b
	}
	p, _ := handMadePath(dir, netns)
	if len(m) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// ForgetHandMade drops the ownership record of netns: called before the
// namespace is deleted, so that a later namespace that happens to get the
// same inode does not inherit it.
func ForgetHandMade(netns string) error {
	p, err := handMadePath(HandMadeDir, netns)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

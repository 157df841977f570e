package dataplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/segchain/segchain/internal/nsutil"
)

// SysctlPath maps a dotted sysctl key to its /proc/sys path. Interface
// names may contain dots, so for net.ipv4.conf.<iface>.<leaf>,
// net.ipv6.conf.<iface>.<leaf> and the neigh equivalents everything between
// the fourth component and the leaf is the interface name; other keys have
// every dot turned into a slash.
func SysctlPath(key string) (string, error) {
	if key == "" || strings.Contains(key, "/") || strings.Contains(key, "..") ||
		strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") {
		return "", fmt.Errorf("sysctl key %q: invalid", key)
	}
	parts := strings.Split(key, ".")
	if len(parts) >= 5 && parts[0] == "net" && (parts[1] == "ipv4" || parts[1] == "ipv6") &&
		(parts[2] == "conf" || parts[2] == "neigh") {
		iface := strings.Join(parts[3:len(parts)-1], ".")
		parts = []string{parts[0], parts[1], parts[2], iface, parts[len(parts)-1]}
	}
	return filepath.Join(append([]string{"/proc/sys"}, parts...)...), nil
}

// Sysctl reads a sysctl inside the handle's namespace (/proc/sys/net is
// per namespace, resolved by the thread that opens it).
func (h *Handle) Sysctl(key string) (string, error) {
	p, err := SysctlPath(key)
	if err != nil {
		return "", err
	}
	var val string
	err = nsutil.Do(h.netns, func() error {
		b, err := os.ReadFile(p)
		val = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read sysctl %s in netns %q: %w", key, h.netns, err)
	}
	return val, nil
}

// Sysctls reads several sysctls inside the handle's namespace, entering
// it once (an observation reads every interface's): "" for a key that
// cannot be read (an interface not yet created).
func (h *Handle) Sysctls(keys []string) []string {
	vals := make([]string, len(keys))
	paths := make([]string, len(keys))
	for i, k := range keys {
		paths[i], _ = SysctlPath(k)
	}
	_ = nsutil.Do(h.netns, func() error {
		for i, p := range paths {
			if p == "" {
				continue
			}
			if b, err := os.ReadFile(p); err == nil {
				vals[i] = strings.TrimSpace(string(b))
			}
		}
		return nil
	})
	return vals
}

// SetSysctl writes a sysctl inside the handle's namespace.
func (h *Handle) SetSysctl(key, value string) error {
	p, err := SysctlPath(key)
	if err != nil {
		return err
	}
	err = nsutil.Do(h.netns, func() error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(value); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		return fmt.Errorf("write sysctl %s=%s in netns %q: %w", key, value, h.netns, err)
	}
	return nil
}

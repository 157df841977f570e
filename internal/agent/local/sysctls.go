package local

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nsutil"
)

// A watched agent (one that lives as long as its node) keeps the sysctl
// files it reads open between requests: a file under /proc/sys/net
// belongs to the namespace of the thread that opened it, and reading it
// again (pread at 0) gives the value now, so a request reads the values
// without entering the namespace and looking the paths up again (that
// was 16 % of an agent's CPU in a no-op apply: docs/scale.md). A
// sysctl changed by hand is therefore seen at once (nothing is cached
// but the open file). An interface that goes takes its sysctl files
// with it: reading a kept file then fails (ENOENT), the file is dropped
// and the key opened again inside the namespace (a new interface of the
// same name has new files); a key that cannot be opened reads "", as
// Handle.Sysctls says.

// maxSysctlFiles bounds the files a node keeps open; keys beyond it are
// read as Handle.Sysctls reads them.
const maxSysctlFiles = 256

// sysctlFiles are a node's kept sysctl files, by key.
type sysctlFiles struct {
	mu     sync.Mutex
	files  map[string]*os.File
	closed bool
	// entered counts the visits to the namespace to open files (tests).
	entered atomic.Uint64
}

// read reads keys: from the kept files, and inside netns (once, for all
// of them) those not kept yet or whose file went.
func (s *sysctlFiles) read(netns string, keys []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := make([]string, len(keys))
	var missing []int
	for i, k := range keys {
		f := s.files[k]
		if f == nil {
			missing = append(missing, i)
			continue
		}
		v, err := readAt0(f)
		if err != nil {
			f.Close()
			delete(s.files, k)
			missing = append(missing, i)
			continue
		}
		vals[i] = v
	}
	if len(missing) == 0 {
		return vals
	}
	s.entered.Add(1)
	_ = nsutil.Do(netns, func() error {
		for _, i := range missing {
			p, err := dataplane.SysctlPath(keys[i])
			if err != nil {
				continue
			}
			f, err := os.Open(p)
			if err != nil {
				continue // "": not there (an interface not yet created)
			}
			v, err := readAt0(f)
			if err != nil {
				f.Close()
				continue
			}
			vals[i] = v
			if s.closed || len(s.files) >= maxSysctlFiles {
				f.Close()
				continue
			}
			if s.files == nil {
				s.files = map[string]*os.File{}
			}
			s.files[keys[i]] = f
		}
		return nil
	})
	return vals
}

// readAt0 reads a sysctl file from its start.
func readAt0(f *os.File) (string, error) {
	var buf [4096]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if n == 0 && err != nil {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// close closes the kept files; later reads keep none.
func (s *sysctlFiles) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.Close()
	}
	s.files, s.closed = nil, true
}

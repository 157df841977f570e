package bpfconst

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// CheckDropEnum compares a compiled program's drop-reason enum (its BTF,
// the truth the kernel runs) with the Go table: every enumerator below
// _MAX must have a distinct name that is not "unknown", and _MAX must be
// n. It is the test-time half of the drift check; the other half is
// `make check-generated`.
func CheckDropEnum(spec *ebpf.CollectionSpec, enum string, n int, name func(uint32) string) error {
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		return fmt.Errorf("enum %s in BTF: %w", enum, err)
	}
	var errs []error
	seen := map[string]string{}
	max := -1
	for _, v := range e.Values {
		if strings.HasSuffix(v.Name, "_MAX") {
			max = int(v.Value)
			continue
		}
		s := name(uint32(v.Value))
		if s == "unknown" {
			errs = append(errs, fmt.Errorf("%s (%d) has no Go name: run make generate", v.Name, v.Value))
			continue
		}
		if prev, dup := seen[s]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both %q", prev, v.Name, s))
		}
		seen[s] = v.Name
	}
	if max != n {
		errs = append(errs, fmt.Errorf("enum %s: _MAX is %d in BTF, %d in Go: run make generate", enum, max, n))
	}
	if max >= 0 && len(seen) != max {
		errs = append(errs, fmt.Errorf("enum %s: %d named reasons, _MAX %d", enum, len(seen), max))
	}
	return errors.Join(errs...)
}

// CheckMapSize reports whether map m of spec holds want entries (a Go
// limit that must be the C program's).
func CheckMapSize(spec *ebpf.CollectionSpec, m string, want uint32) error {
	ms, ok := spec.Maps[m]
	if !ok {
		return fmt.Errorf("map %s: not in the program", m)
	}
	if ms.MaxEntries != want {
		return fmt.Errorf("map %s: %d entries in C, Go expects %d", m, ms.MaxEntries, want)
	}
	return nil
}

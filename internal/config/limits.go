package config

import (
	"fmt"
	"os"
)

// Input bounds: a domain beyond them is refused before it is validated
// further, with the bound named (docs/config.md, "Limits"). They keep
// validate's time and memory bounded (it is linear in the file: about
// 0.1 s and 6 MB per 1,000 services on one core) and are far above any
// deployment: what the data path holds per node is checked per kind.
const (
	// MaxFileSize bounds the domain file (bytes).
	MaxFileSize = 32 << 20
	// MaxServices bounds the services of a domain.
	MaxServices = 1 << 20
	// MaxLinks bounds the links of a domain.
	MaxLinks = 1 << 16
	// MaxChainDirections bounds the chains, a bidirectional chain counted
	// twice: each direction has a routing table of its own in segchain's
	// range (tables 1000..30999, see docs/apply.md).
	MaxChainDirections = 30000
)

// ChainDirections is the number of chain directions of d (a
// bidirectional chain counts twice).
func ChainDirections(d *Domain) int {
	n := 0
	for _, c := range d.Chains {
		n++
		if c != nil && c.Bidirectional {
			n++
		}
	}
	return n
}

// checkSize refuses a file larger than MaxFileSize.
func checkSize(n int64) error {
	if n > MaxFileSize {
		return ErrorList{&FieldError{Msg: fmt.Sprintf("domain file is %d bytes, at most %d (%d MiB)", n, MaxFileSize, MaxFileSize>>20)}}
	}
	return nil
}

// statSize refuses a file larger than MaxFileSize before reading it.
func statSize(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // ReadFile says why
	}
	return checkSize(fi.Size())
}

// bounds checks the counts of a decoded domain.
func (v *validator) bounds() bool {
	ok := true
	for _, b := range []struct {
		path string
		n    int
		max  int
		what string
	}{
		{"services", len(v.d.Services), MaxServices, "services"},
		{"links", len(v.d.Links), MaxLinks, "links"},
		{"chains", ChainDirections(v.d), MaxChainDirections, "chain directions (a bidirectional chain counts twice: one routing table each)"},
	} {
		if b.n > b.max {
			v.errf(b.path, "%d %s, at most %d", b.n, b.what, b.max)
			ok = false
		}
	}
	return ok
}

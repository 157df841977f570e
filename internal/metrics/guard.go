package metrics

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// Access says who may scrape an agent's /metrics (docs/metrics.md,
// "Who may scrape"): a request must come from one of Allow's prefixes
// and, when Token is set, carry it as a bearer token
// (Authorization: Bearer TOKEN, Prometheus' `authorization:
// credentials_file`). The zero value lets loopback only.
type Access struct {
	Allow []netip.Prefix
	Token []byte
}

// Loopback is the default of Access.Allow.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseAllow reads --metrics-allow values: prefixes or addresses
// ("fd00:1::/64", "10.0.0.7"); none is Loopback.
func ParseAllow(vals []string) ([]netip.Prefix, error) {
	if len(vals) == 0 {
		return Loopback, nil
	}
	var out []netip.Prefix
	for _, v := range vals {
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("--metrics-allow %q: not a prefix or an address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// ReadToken reads a bearer token file: its first line, which must not be
// empty; the file must not be readable by others than its owner.
func ReadToken(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--metrics-token-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--metrics-token-file %s: mode %o, want it readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--metrics-token-file: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return nil, fmt.Errorf("--metrics-token-file %s: empty", path)
	}
	return []byte(tok), nil
}

// Guard serves h to the requests a allows: 403 to a source outside
// a.Allow, 401 without the token. Refusals are not logged per request (a
// scanner would flood the log); they are counted in denied, if set.
func Guard(h http.Handler, a Access, denied func(reason string)) http.Handler {
	allow := a.Allow
	if len(allow) == 0 {
		allow = Loopback
	}
	var want [sha256.Size]byte
	if a.Token != nil {
		want = sha256.Sum256(a.Token)
	}
	deny := func(w http.ResponseWriter, code int, reason string) {
		if denied != nil {
			denied(reason)
		}
		http.Error(w, http.StatusText(code), code)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		src, perr := netip.ParseAddr(host)
		if err != nil || perr != nil || !inAny(allow, src.Unmap().WithZone("")) {
			deny(w, http.StatusForbidden, "source")
			return
		}
		if a.Token != nil {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			// Compared as digests, in constant time: the token's length
			// leaks nothing either.
			if g := sha256.Sum256([]byte(got)); !ok || subtle.ConstantTimeCompare(g[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="segchain agent metrics"`)
				deny(w, http.StatusUnauthorized, "token")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

package ids

import (
	"fmt"
	"strings"
)

// SyntheticRules returns n generated content rules (sids 1000000 up), the
// rule sets of the benchmarks (BenchmarkInspect, the service's "IDS with
// 1,000 rules" measurement). They are shaped like web-attack signatures:
// the fast pattern is a URI path, a query parameter, a header value, a
// function call or a binary prefix, so patterns start with many different
// bytes; a third are nocase, a fifth also anchor "GET " with depth, a
// quarter have a relative second content, a seventh look for an
// "X-Attack-N:" header instead. 80 % are TCP rules on ports 80/8080, 10 %
// UDP and 10 % ip rules, so every packet class has a prefilter to run.
// Ordinary web traffic matches none of them; "/exec1.asp" in an HTTP
// request to port 80 matches sid 1000001.
func SyntheticRules(n int) string {
	words := []string{"cmd", "exec", "shell", "admin", "passwd", "union", "select", "eval", "base64", "wp-",
		"phpmy", "cgi", "backdoor", "upload", "config", "debug", "setup", "xmlrpc", "invoker", "struts"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := words[i%len(words)]
		var pat string
		switch i % 6 {
		case 0, 1: // a URI path
			pat = fmt.Sprintf("/%s%d.%s", w, i, []string{"php", "asp", "jsp", "cgi"}[i%4])
		case 2: // a query parameter
			pat = fmt.Sprintf("%s%d=", w, i)
		case 3: // a header value
			pat = fmt.Sprintf("User-Agent|3a| %s-%d", w, i)
		case 4: // a function call in a body
			pat = fmt.Sprintf("%s_%d(", w, i)
		case 5: // binary
			pat = fmt.Sprintf("|de ad be ef|%s%d", w, i)
		}
		opts := fmt.Sprintf(`content:"%s";`, pat)
		if i%3 == 0 {
			opts += " nocase;"
		}
		if i%5 == 0 {
			opts = fmt.Sprintf(`content:"GET "; depth:4; %s`, opts)
		}
		if i%4 == 0 {
			opts += fmt.Sprintf(` content:"id=%d"; distance:0;`, i)
		}
		if i%7 == 0 {
			opts = fmt.Sprintf(`content:"X-Attack-%d|3a|"; nocase;`, i)
		}
		hdr := "tcp any any -> any [80,8080]"
		switch i % 10 {
		case 8:
			hdr = "udp any any -> any any"
		case 9:
			hdr = "ip any any -> any any"
		}
		fmt.Fprintf(&b, "alert %s (msg:\"synthetic rule %d\"; %s sid:%d;)\n", hdr, i, opts, 1000000+i)
	}
	return b.String()
}

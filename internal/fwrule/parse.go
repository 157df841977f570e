package fwrule

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// ParseError is a rule the parser rejects. Token is the offending token
// (empty when the rule as a whole is wrong, e.g. a missing -j).
type ParseError struct {
	Token  string
	Reason string
}

func (e *ParseError) Error() string {
	if e.Token == "" {
		return e.Reason
	}
	return fmt.Sprintf("%q: %s", e.Token, e.Reason)
}

func perr(tok, format string, a ...any) *ParseError {
	return &ParseError{Token: tok, Reason: fmt.Sprintf(format, a...)}
}

// String is the lower-case name of a target kind as the domain file and
// `fw args` spell it: accept, drop, reject, go-next, skip-next, go-last,
// eval-args.
func (k TargetKind) String() string {
	switch k {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Reject:
		return "reject"
	case SkipNext:
		return "skip-next"
	case GoLast:
		return "go-last"
	case EvalArgs:
		return "eval-args"
	case GoNext:
		return "go-next"
	}
	return fmt.Sprintf("TargetKind(%d)", uint8(k))
}

// ParseTargetKind reads a TargetKind name (case-insensitive; the seg6-
// prefix of the SERA listing is accepted).
func ParseTargetKind(s string) (TargetKind, error) {
	l := strings.ToLower(s)
	switch l {
	case "accept":
		return Accept, nil
	case "drop":
		return Drop, nil
	case "reject":
		return Reject, nil
	}
	if k, ok := seg6Actions[l]; ok {
		return k, nil
	}
	return 0, fmt.Errorf("unknown action %q (want accept, drop, reject, go-next, skip-next, go-last or eval-args)", s)
}

// MarshalText writes the kind's name (JSON and YAML use it).
func (k TargetKind) MarshalText() ([]byte, error) {
	if k > GoNext {
		return nil, fmt.Errorf("invalid target kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind's name.
func (k *TargetKind) UnmarshalText(b []byte) error {
	v, err := ParseTargetKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// DefaultArgs is the eval-args table a firewall instance starts with: the
// ARGS value of the active SID selects the action.
func DefaultArgs() map[uint32]TargetKind {
	return map[uint32]TargetKind{0: GoNext, 1: Drop, 2: SkipNext, 3: GoLast}
}

// ParseLine splits line like a POSIX shell (single and double quotes,
// backslash escapes; no expansions) and parses the words with Parse.
func ParseLine(line string, fam Family) (Rule, error) {
	args, err := SplitWords(line)
	if err != nil {
		return Rule{}, err
	}
	return Parse(args, fam)
}

// SplitWords splits a line into words with shell-like quoting: '...'
// literal, "..." with \" \\ escapes, and backslash outside quotes.
func SplitWords(line string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\'':
			in = true
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, perr(line[i:], "unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			in = true
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) && (line[j+1] == '"' || line[j+1] == '\\' || line[j+1] == '$' || line[j+1] == '`') {
					j++
				}
				cur.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, perr(line[i:], "unterminated double quote")
			}
			i = j
		case c == '\\':
			in = true
			if i+1 < len(line) {
				i++
				cur.WriteByte(line[i])
			}
		default:
			in = true
			cur.WriteByte(c)
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// protoModules are the -m modules that only repeat what -p implies (saved
// rule sets carry them). As in iptables, each needs -p of its protocol
// (not negated), and the ICMP ones exist in their family only (icmpv6 and
// ipv6-icmp are iptables' aliases of icmp6).
var protoModules = map[string]struct {
	proto uint8
	fam   Family // 0: both
}{
	"tcp": {ProtoTCP, 0}, "udp": {ProtoUDP, 0}, "sctp": {ProtoSCTP, 0}, "udplite": {ProtoUDPLite, 0},
	"icmp": {ProtoICMP, IPv4}, "icmp6": {ProtoICMPv6, IPv6}, "icmpv6": {ProtoICMPv6, IPv6}, "ipv6-icmp": {ProtoICMPv6, IPv6},
}

// valueShort are the short options that take a value, which getopt lets
// a rule glue to the option (-ptcp, -s10.0.0.1).
var valueShort = map[string]bool{"-s": true, "-d": true, "-p": true, "-j": true, "-m": true, "-A": true, "-i": true, "-o": true, "-g": true}

// unglue splits getopt's one-word forms of an option and its value,
// --protocol=tcp and -ptcp, as iptables accepts them.
func unglue(tok string) (opt, val string, ok bool) {
	known := func(o string) bool {
		_, a := optAlias[o]
		_, u := unsupported[o]
		return a || u
	}
	if strings.HasPrefix(tok, "--") {
		o, v, has := strings.Cut(tok, "=")
		if has && known(o) {
			return o, v, true
		}
		return "", "", false
	}
	if len(tok) > 2 && tok[0] == '-' && valueShort[tok[:2]] {
		return tok[:2], tok[2:], true
	}
	return "", "", false
}

// Parse reads one rule in ip6tables (fam IPv6) or iptables (fam IPv4)
// syntax; a -4 or -6 word (as iptables-restore accepts) overrides fam. The chain prefix `-A FORWARD` / `--append FORWARD` is accepted
// and ignored, as are the -m modules that -p implies and `-m comment
// --comment X` (kept in Rule.Comment). Errors name the offending token.
func Parse(args []string, fam Family) (Rule, error) {
	if fam != IPv4 && fam != IPv6 {
		return Rule{}, perr("", "unknown family %d", fam)
	}
	// -4/-6 (iptables-restore's family flags) choose the family of this
	// rule whatever fam says, so one list can mix IPv4 and IPv6 rules.
	var rest []string
	famTok := ""
	for _, a := range args {
		switch a {
		case "-4", "--ipv4", "-6", "--ipv6":
			if famTok != "" {
				return Rule{}, perr(a, "family given twice (after %s)", famTok)
			}
			famTok = a
			fam = IPv6
			if a == "-4" || a == "--ipv4" {
				fam = IPv4
			}
			continue
		}
		rest = append(rest, a)
	}
	if famTok != "" {
		args = rest
	}
	p := parser{args: args, r: Rule{Family: fam}}
	if err := p.parse(); err != nil {
		return Rule{}, err
	}
	return p.r, nil
}

type parser struct {
	args    []string
	i       int
	r       Rule
	seen    map[string]bool
	hasJump bool
	comment bool
	modules []string // protocol -m modules, checked against -p in finish
	srhOpt  string
	portTok string
	icmpTok string
	rejTok  string
	seg6Tok string
}

func (p *parser) next(opt string) (string, error) {
	if p.i >= len(p.args) {
		return "", perr(opt, "missing value")
	}
	v := p.args[p.i]
	p.i++
	return v, nil
}

// once records an option (by its canonical name) and rejects repeats.
func (p *parser) once(canon, tok string) error {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[canon] {
		return perr(tok, "given more than once")
	}
	p.seen[canon] = true
	return nil
}

var optAlias = map[string]string{
	"-s": "-s", "--source": "-s", "--src": "-s",
	"-d": "-d", "--destination": "-d", "--dst": "-d",
	"-p": "-p", "--protocol": "-p",
	"--sport": "--sport", "--source-port": "--sport",
	"--dport": "--dport", "--destination-port": "--dport",
	"-j": "-j", "--jump": "-j",
	"-m": "-m", "--match": "-m",
	"-A": "-A", "--append": "-A",
	"--icmpv6-type": "--icmpv6-type", "--icmp-type": "--icmp-type",
	"--comment":      "--comment",
	"--inner-src":    "--inner-src",
	"--inner-dst":    "--inner-dst",
	"--srh-next-hdr": "--srh-next-hdr",
	"--srh-len-eq":   "--srh-hdr-len-eq", "--srh-hdr-len-eq": "--srh-hdr-len-eq",
	"--srh-len-gt": "--srh-hdr-len-gt", "--srh-hdr-len-gt": "--srh-hdr-len-gt",
	"--srh-len-lt": "--srh-hdr-len-lt", "--srh-hdr-len-lt": "--srh-hdr-len-lt",
	"--srh-segs-eq": "--srh-segs-left-eq", "--srh-segs-left-eq": "--srh-segs-left-eq",
	"--srh-segs-gt": "--srh-segs-left-gt", "--srh-segs-left-gt": "--srh-segs-left-gt",
	"--srh-segs-lt": "--srh-segs-left-lt", "--srh-segs-left-lt": "--srh-segs-left-lt",
	"--srh-last-eq": "--srh-last-entry-eq", "--srh-last-entry-eq": "--srh-last-entry-eq",
	"--srh-last-gt": "--srh-last-entry-gt", "--srh-last-entry-gt": "--srh-last-entry-gt",
	"--srh-last-lt": "--srh-last-entry-lt", "--srh-last-entry-lt": "--srh-last-entry-lt",
	"--srh-tag":     "--srh-tag",
	"--srh-psid":    "--srh-psid",
	"--srh-nsid":    "--srh-nsid",
	"--srh-lsid":    "--srh-lsid",
	"--reject-with": "--reject-with",
	"--seg6-action": "--seg6-action",
}

// unsupported explains options iptables has but the SR-aware firewall
// does not implement.
var unsupported = map[string]string{
	"-i": "interface matches are not supported", "--in-interface": "interface matches are not supported",
	"-o": "interface matches are not supported", "--out-interface": "interface matches are not supported",
	"-f": "fragment matches are not supported", "--fragment": "fragment matches are not supported",
	"-g": "goto is not supported", "--goto": "goto is not supported",
	"--tcp-flags": "TCP flag matches are not supported", "--syn": "TCP flag matches are not supported",
	"--tcp-option":  "TCP option matches are not supported",
	"--chunk-types": "SCTP chunk matches are not supported",
	"-c":            "counters cannot be set", "--set-counters": "counters cannot be set",
}

func (p *parser) parse() error {
	neg := false
	negTok := ""
	for p.i < len(p.args) {
		tok := p.args[p.i]
		p.i++
		if tok == "!" {
			if neg {
				return perr(tok, "double negation")
			}
			neg, negTok = true, tok
			continue
		}
		canon, ok := optAlias[tok]
		if _, unsup := unsupported[tok]; !ok && !unsup {
			if opt, val, glued := unglue(tok); glued {
				// The value becomes the next word (the caller's slice is
				// not written to).
				p.args = append(append(append([]string{}, p.args[:p.i]...), val), p.args[p.i:]...)
				tok = opt
				canon, ok = optAlias[tok]
			}
		}
		if !ok {
			if why, ok := unsupported[tok]; ok {
				return perr(tok, "%s", why)
			}
			if strings.HasPrefix(tok, "-") {
				return perr(tok, "unknown option")
			}
			return perr(tok, "unexpected argument (options start with -)")
		}
		if neg && !negatable(canon) {
			return perr(negTok+" "+tok, "%s cannot be negated", tok)
		}
		if err := p.option(canon, tok, neg); err != nil {
			return err
		}
		neg = false
	}
	if neg {
		return perr("!", "negation without an option after it")
	}
	return p.finish()
}

func negatable(canon string) bool {
	switch canon {
	case "-j", "-m", "-A", "--comment", "--reject-with", "--seg6-action":
		return false
	}
	return true
}

// value reads an option's value and rejects the old intrapositioned
// negation (`-s ! x`), which modern iptables no longer accepts either.
func (p *parser) value(tok string) (string, error) {
	v, err := p.next(tok)
	if err != nil {
		return "", err
	}
	if v == "!" {
		return "", perr(tok+" !", "write the negation before the option: ! %s VALUE", tok)
	}
	return v, nil
}

func (p *parser) option(canon, tok string, neg bool) error {
	if canon != "-m" && canon != "-A" {
		if err := p.once(canon, tok); err != nil {
			return err
		}
	}
	switch canon {
	case "-A":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		if v != "FORWARD" {
			return perr(v, "rules belong to the FORWARD chain (got -A %s)", v)
		}
	case "-m":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		switch {
		case v == "srh":
			if p.r.Family != IPv6 {
				return perr(v, "the srh match is IPv6 only (ip6tables)")
			}
			p.r.SRH = true
		case v == "comment":
			p.comment = true
		case protoModules[v].proto != 0:
			if m := protoModules[v]; m.fam != 0 && m.fam != p.r.Family {
				return perr(v, "no %s match in %s rules", v, famName(p.r.Family))
			}
			p.modules = append(p.modules, v)
		default:
			return perr(v, "unsupported match module")
		}
	case "--comment":
		if !p.comment {
			return perr(tok, "needs -m comment")
		}
		v, err := p.next(tok)
		if err != nil {
			return err
		}
		if len(v) > 255 {
			return perr(tok, "comment longer than 255 characters (iptables' limit)")
		}
		p.r.Comment = v
	case "-s", "-d", "--inner-src", "--inner-dst", "--srh-psid", "--srh-nsid", "--srh-lsid":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		fam := p.r.Family
		switch canon {
		case "--inner-src", "--inner-dst":
			fam = 0 // either family: the original may be IPv4 in encap mode
		case "--srh-psid", "--srh-nsid", "--srh-lsid":
			fam = IPv6
		}
		pfx, err := parsePrefix(v, fam)
		if err != nil {
			return err
		}
		pp := &Prefix{Prefix: pfx, Neg: neg}
		switch canon {
		case "-s":
			p.r.Src = pp
		case "-d":
			p.r.Dst = pp
		case "--inner-src":
			p.r.InnerSrc = pp
		case "--inner-dst":
			p.r.InnerDst = pp
		case "--srh-psid":
			p.r.PSID = pp
		case "--srh-nsid":
			p.r.NSID = pp
		case "--srh-lsid":
			p.r.LSID = pp
		}
		if canon != "-s" && canon != "-d" {
			p.needSRH(tok)
		}
	case "-p":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		n := uint8(0)
		if v != "all" {
			if n, err = parseProto(v); err != nil {
				return err
			}
		}
		// Protocol 0 is "all" to iptables, however it is written ("0",
		// "00"): no protocol match.
		if n == 0 {
			if neg {
				return perr(v, "! -p all never matches")
			}
			return nil
		}
		if p.r.Family == IPv4 && n == ProtoICMPv6 {
			return perr(v, "ICMPv6 in an IPv4 (iptables) rule")
		}
		if p.r.Family == IPv6 && n == ProtoICMP {
			return perr(v, "ICMP (IPv4) in an IPv6 (ip6tables) rule: use ipv6-icmp")
		}
		p.r.Proto = &Value8{Value: n, Neg: neg}
	case "--sport", "--dport":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		pr, err := parsePorts(v)
		if err != nil {
			return err
		}
		pr.Neg = neg
		if canon == "--sport" {
			p.r.SPort = &pr
		} else {
			p.r.DPort = &pr
		}
		p.portTok = tok
	case "--icmpv6-type", "--icmp-type":
		if (canon == "--icmpv6-type") != (p.r.Family == IPv6) {
			if p.r.Family == IPv6 {
				return perr(tok, "ip6tables rules use --icmpv6-type")
			}
			return perr(tok, "iptables rules use --icmp-type")
		}
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		ic, err := parseICMP(v, p.r.Family)
		if err != nil {
			return err
		}
		ic.Neg = neg
		p.r.ICMP = &ic
		p.icmpTok = tok
	case "--srh-next-hdr":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		n, err := parseProto(v)
		if err != nil {
			return err
		}
		p.r.NextHdr = &Value8{Value: n, Neg: neg}
		p.needSRH(tok)
	case "--srh-hdr-len-eq", "--srh-hdr-len-gt", "--srh-hdr-len-lt",
		"--srh-segs-left-eq", "--srh-segs-left-gt", "--srh-segs-left-lt",
		"--srh-last-entry-eq", "--srh-last-entry-gt", "--srh-last-entry-lt":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 0, 8)
		if err != nil {
			return perr(v, "want a number 0-255 for %s", tok)
		}
		c := &Compare8{Value: uint8(n), Neg: neg}
		switch canon[len(canon)-2:] {
		case "eq":
			c.Op = Eq
		case "gt":
			c.Op = Gt
		case "lt":
			c.Op = Lt
		}
		field := canon[:len(canon)-3]
		if err := p.once(field, tok); err != nil {
			return perr(tok, "only one of %s-eq/-gt/-lt per rule", field)
		}
		switch field {
		case "--srh-hdr-len":
			p.r.HdrLen = c
		case "--srh-segs-left":
			p.r.SegsLeft = c
		case "--srh-last-entry":
			p.r.LastEntry = c
		}
		p.needSRH(tok)
	case "--srh-tag":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 0, 16)
		if err != nil {
			return perr(v, "want a number 0-65535 for %s", tok)
		}
		p.r.Tag = &Tag{Value: uint16(n), Neg: neg}
		p.needSRH(tok)
	case "-j":
		v, err := p.value(tok)
		if err != nil {
			return err
		}
		switch v {
		case "ACCEPT":
			p.r.Target.Kind = Accept
		case "DROP":
			p.r.Target.Kind = Drop
		case "REJECT":
			p.r.Target.Kind = Reject
		case "SEG6":
			// Also in IPv4 rules (-4): the action applies to the SRv6
			// packet that carries the IPv4 original.
			p.r.Target.Kind = GoNext
		case "RETURN", "LOG", "QUEUE", "NFQUEUE", "MARK", "CONNMARK", "TRACE", "NOTRACK", "CT", "MASQUERADE", "SNAT", "DNAT", "TCPMSS", "CLASSIFY", "DSCP", "TEE", "NFLOG", "AUDIT", "CHECKSUM", "HMARK", "REDIRECT", "TPROXY":
			return perr(v, "unsupported target (want ACCEPT, DROP, REJECT or SEG6)")
		default:
			return perr(v, "jumps to user-defined chains are not supported (want ACCEPT, DROP, REJECT or SEG6)")
		}
		p.hasJump = true
		p.r.Target.RejectWith = ""
	case "--reject-with":
		v, err := p.next(tok)
		if err != nil {
			return err
		}
		if !p.hasJump || p.r.Target.Kind != Reject {
			return perr(tok, "needs -j REJECT before it")
		}
		table := rejectWith6
		if p.r.Family == IPv4 {
			table = rejectWith4
		}
		c, ok := table[v]
		if !ok {
			return perr(v, "unknown --reject-with value for %s", famName(p.r.Family))
		}
		p.r.Target.RejectWith = c
		p.rejTok = v
	case "--seg6-action":
		v, err := p.next(tok)
		if err != nil {
			return err
		}
		if !p.hasJump || p.seg6Tok != "" || !isSeg6(p.r.Target.Kind) {
			return perr(tok, "needs -j SEG6 before it")
		}
		k, ok := seg6Actions[v]
		if !ok {
			return perr(v, "unknown SEG6 action (want go-next, skip-next, go-last or eval-args)")
		}
		p.r.Target.Kind = k
		p.seg6Tok = v
	}
	return nil
}

func isSeg6(k TargetKind) bool { return k == GoNext || k == SkipNext || k == GoLast || k == EvalArgs }

func famName(f Family) string {
	if f == IPv4 {
		return "IPv4"
	}
	return "IPv6"
}

// needSRH is called by srh options; the check that -m srh is present
// happens in finish so `--srh-tag 5 -m srh` is as wrong as in ip6tables.
func (p *parser) needSRH(tok string) {
	if p.srhOpt == "" {
		p.srhOpt = tok
	}
}

func (p *parser) finish() error {
	if p.srhOpt != "" && !p.r.SRH {
		return perr(p.srhOpt, "needs -m srh")
	}
	if p.portTok != "" {
		if p.r.Proto == nil || p.r.Proto.Neg || !hasPorts(p.r.Proto.Value) {
			return perr(p.portTok, "needs -p tcp, udp, sctp or udplite")
		}
	}
	if p.icmpTok != "" {
		want := uint8(ProtoICMPv6)
		if p.r.Family == IPv4 {
			want = ProtoICMP
		}
		if p.r.Proto == nil || p.r.Proto.Neg || p.r.Proto.Value != want {
			if p.r.Family == IPv4 {
				return perr(p.icmpTok, "needs -p icmp")
			}
			return perr(p.icmpTok, "needs -p ipv6-icmp")
		}
	}
	for _, m := range p.modules {
		if want := protoModules[m].proto; p.r.Proto == nil || p.r.Proto.Neg || p.r.Proto.Value != want {
			return perr(m, "-m %s needs -p %s", m, protoName(want))
		}
	}
	if !p.hasJump {
		return perr("", "missing -j target (ACCEPT, DROP, REJECT or SEG6): rules without one are not supported")
	}
	if p.r.Target.Kind == Reject {
		if p.r.Target.RejectWith == "" {
			p.r.Target.RejectWith = DefaultRejectWith(p.r.Family)
		}
		if p.r.Target.RejectWith == "tcp-reset" && (p.r.Proto == nil || p.r.Proto.Neg || p.r.Proto.Value != ProtoTCP) {
			return perr(p.rejTok, "needs -p tcp")
		}
	}
	if p.comment && !p.seen["--comment"] {
		return perr("comment", "-m comment needs --comment")
	}
	return nil
}

func parseProto(v string) (uint8, error) {
	if n, ok := protoNames[strings.ToLower(v)]; ok {
		return n, nil
	}
	n, err := strconv.ParseUint(v, 10, 8)
	if err != nil {
		return 0, perr(v, "unknown protocol")
	}
	return uint8(n), nil
}

// parsePrefix reads addr[/len] or addr[/mask] (a contiguous mask, as
// ip6tables accepts). fam 0 accepts either family.
func parsePrefix(v string, fam Family) (netip.Prefix, error) {
	if strings.Contains(v, ",") {
		return netip.Prefix{}, perr(v, "address lists are not supported: write one rule per address")
	}
	addrPart, maskPart, hasMask := strings.Cut(v, "/")
	a, err := netip.ParseAddr(addrPart)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, perr(v, "not an address (host names are not resolved)")
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	switch {
	case fam == IPv6 && !a.Is6():
		return netip.Prefix{}, perr(v, "want an IPv6 address")
	case fam == IPv4 && !a.Is4():
		return netip.Prefix{}, perr(v, "want an IPv4 address")
	}
	bitsLen := a.BitLen()
	if hasMask {
		if n, err := strconv.Atoi(maskPart); err == nil {
			if n < 0 || n > a.BitLen() {
				return netip.Prefix{}, perr(v, "prefix length out of range")
			}
			bitsLen = n
		} else {
			m, err := netip.ParseAddr(maskPart)
			if err != nil || m.BitLen() != a.BitLen() {
				return netip.Prefix{}, perr(v, "bad mask")
			}
			n, ok := maskLen(m.AsSlice())
			if !ok {
				return netip.Prefix{}, perr(v, "non-contiguous masks are not supported")
			}
			bitsLen = n
		}
	}
	return netip.PrefixFrom(a, bitsLen).Masked(), nil
}

func maskLen(b []byte) (int, bool) {
	n := 0
	for i, c := range b {
		if c == 0xff {
			n += 8
			continue
		}
		l := bits.LeadingZeros8(^c)
		if c<<l != 0 {
			return 0, false
		}
		n += l
		for _, r := range b[i+1:] {
			if r != 0 {
				return 0, false
			}
		}
		return n, true
	}
	return n, true
}

// parsePorts reads N, LO:HI, :HI or LO: (iptables' spellings).
func parsePorts(v string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(v, ":")
	if !isRange {
		n, err := parsePort(v, v)
		return PortRange{Lo: n, Hi: n}, err
	}
	var pr PortRange
	var err error
	pr.Hi = 65535
	if lo != "" {
		if pr.Lo, err = parsePort(lo, v); err != nil {
			return pr, err
		}
	}
	if hi != "" {
		if pr.Hi, err = parsePort(hi, v); err != nil {
			return pr, err
		}
	}
	if pr.Lo > pr.Hi {
		return pr, perr(v, "invalid port range (min > max)")
	}
	return pr, nil
}

func parsePort(s, tok string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, perr(tok, "want a port number 0-65535 or a range LO:HI")
	}
	return uint16(n), nil
}

// parseICMP reads TYPE, TYPE/CODE, TYPE/MIN:MAX or a name of the family's
// table (iptables' libxt_icmp.h lists; like iptables, any unambiguous
// prefix of a name, in any case). In IPv4, type 255 ("any") matches every
// ICMP packet whatever the codes, as the kernel's icmp match does.
func parseICMP(v string, fam Family) (ICMP, error) {
	table := icmpv6Names
	if fam == IPv4 {
		table = icmpNames
	}
	var found []icmpName
	for _, n := range table {
		if strings.EqualFold(n.name, v) {
			found = []icmpName{n}
			break
		}
		if v != "" && len(v) < len(n.name) && strings.EqualFold(n.name[:len(v)], v) {
			found = append(found, n)
		}
	}
	if len(found) > 1 {
		return ICMP{}, perr(v, "ambiguous ICMP type name: %s or %s?", found[0].name, found[1].name)
	}
	var ic ICMP
	if len(found) == 1 {
		n := found[0]
		ic = ICMP{Type: n.typ, Code: n.code, AnyCode: n.anyCode}
	} else {
		ts, cs, hasCode := strings.Cut(v, "/")
		t, err := strconv.ParseUint(ts, 10, 8)
		if err != nil {
			return ICMP{}, perr(v, "unknown ICMP type (a number, TYPE/CODE, TYPE/MIN:MAX or a name such as echo-request)")
		}
		ic = ICMP{Type: uint8(t), AnyCode: true}
		if hasCode {
			los, his, isRange := strings.Cut(cs, ":")
			lo, err := strconv.ParseUint(los, 10, 8)
			hi := lo
			if err == nil && isRange {
				hi, err = strconv.ParseUint(his, 10, 8)
			}
			if err != nil {
				return ICMP{}, perr(v, "bad ICMP code (want CODE or MIN:MAX, 0-255)")
			}
			if lo > hi {
				return ICMP{}, perr(v, "empty ICMP code range (MIN > MAX): it would never match")
			}
			if lo > 0 || hi < 255 {
				ic.Code, ic.CodeHi, ic.AnyCode = uint8(lo), uint8(hi), false
				if hi == lo {
					ic.CodeHi = 0
				}
			}
		}
	}
	if fam == IPv4 && ic.Type == 255 {
		ic = ICMP{Type: 255, AnyCode: true, AnyType: true}
	}
	return ic, nil
}

// Args are the rule's words in canonical order, the inverse of Parse.
func (r Rule) Args() []string {
	var a []string
	if r.Family == IPv4 {
		a = append(a, "-4")
	}
	neg := func(n bool) {
		if n {
			a = append(a, "!")
		}
	}
	pfx := func(opt string, p *Prefix) {
		if p != nil {
			neg(p.Neg)
			a = append(a, opt, p.Prefix.String())
		}
	}
	pfx("-s", r.Src)
	pfx("-d", r.Dst)
	if r.Proto != nil {
		neg(r.Proto.Neg)
		a = append(a, "-p", protoName(r.Proto.Value))
	}
	ports := func(opt string, p *PortRange) {
		if p == nil {
			return
		}
		neg(p.Neg)
		if p.Lo == p.Hi {
			a = append(a, opt, strconv.Itoa(int(p.Lo)))
		} else {
			a = append(a, opt, fmt.Sprintf("%d:%d", p.Lo, p.Hi))
		}
	}
	ports("--sport", r.SPort)
	ports("--dport", r.DPort)
	if r.ICMP != nil {
		neg(r.ICMP.Neg)
		opt := "--icmpv6-type"
		if r.Family == IPv4 {
			opt = "--icmp-type"
		}
		v := strconv.Itoa(int(r.ICMP.Type))
		switch {
		case r.ICMP.AnyType:
			v = "any"
		case r.ICMP.AnyCode:
		case r.ICMP.CodeHi > r.ICMP.Code:
			v += fmt.Sprintf("/%d:%d", r.ICMP.Code, r.ICMP.CodeHi)
		default:
			v += "/" + strconv.Itoa(int(r.ICMP.Code))
		}
		a = append(a, opt, v)
	}
	if r.SRH {
		a = append(a, "-m", "srh")
		pfx("--inner-src", r.InnerSrc)
		pfx("--inner-dst", r.InnerDst)
		if r.NextHdr != nil {
			neg(r.NextHdr.Neg)
			a = append(a, "--srh-next-hdr", strconv.Itoa(int(r.NextHdr.Value)))
		}
		cmp := func(base string, c *Compare8) {
			if c == nil {
				return
			}
			neg(c.Neg)
			op := [...]string{"eq", "gt", "lt"}[c.Op%3]
			a = append(a, base+"-"+op, strconv.Itoa(int(c.Value)))
		}
		cmp("--srh-hdr-len", r.HdrLen)
		cmp("--srh-segs-left", r.SegsLeft)
		cmp("--srh-last-entry", r.LastEntry)
		if r.Tag != nil {
			neg(r.Tag.Neg)
			a = append(a, "--srh-tag", strconv.Itoa(int(r.Tag.Value)))
		}
		pfx("--srh-psid", r.PSID)
		pfx("--srh-nsid", r.NSID)
		pfx("--srh-lsid", r.LSID)
	}
	if r.Comment != "" {
		a = append(a, "-m", "comment", "--comment", r.Comment)
	}
	switch r.Target.Kind {
	case Accept:
		a = append(a, "-j", "ACCEPT")
	case Drop:
		a = append(a, "-j", "DROP")
	case Reject:
		a = append(a, "-j", "REJECT")
		w := r.Target.RejectWith
		if w == "" {
			w = DefaultRejectWith(r.Family)
		}
		a = append(a, "--reject-with", w)
	default:
		a = append(a, "-j", "SEG6", "--seg6-action", r.Target.Kind.String())
	}
	return a
}

// String is the rule in canonical ip6tables/iptables syntax (words that
// need it are double-quoted; IPv4 rules start with -4, so ParseLine reads
// the String of any rule back to an equal rule when given IPv6, the
// default family).
func (r Rule) String() string {
	a := r.Args()
	for i, w := range a {
		a[i] = quote(w)
	}
	return strings.Join(a, " ")
}

func quote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n\r'\"\\$`") {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c == '"' || c == '\\' || c == '$' || c == '`' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

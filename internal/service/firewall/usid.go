package firewall

import "github.com/segchain/segchain/internal/fwrule"

// CSIDRefusal says why a firewall service cannot take a uSID in an f3216
// domain ("" when it can). A uSID instance applies End with NEXT-C-SID on
// go-next/accept (bpf/lib/csid.h). The bits after the uSID are the
// container's next uSIDs, so there are no ARGS: eval-args needs a full
// SID; skip-next and go-last move by SRH entries, which a container's
// uSIDs are not, and -m srh rules see containers (or no SRH at all), so
// they keep a full SID too (docs/usid.md).
func (Kind) CSIDRefusal(block any, dir string) string {
	c, _ := block.(*Config)
	r, err := Resolve(c, dir, 0)
	if err != nil {
		return "its rules do not resolve: " + err.Error()
	}
	if len(c.argsOrNil()) > 0 {
		return "an ARGS table (eval-args reads ARGS bits, which a uSID container uses for the next uSIDs)"
	}
	for _, rule := range r.Rules {
		switch rule.Target.Kind {
		case fwrule.EvalArgs:
			return "a rule uses eval-args (ARGS bits are the next uSIDs in a container)"
		case fwrule.SkipNext, fwrule.GoLast:
			return "a rule uses skip-next or go-last (they move by SRH entries, not by uSIDs)"
		}
		if rule.SRH {
			return "a rule matches the SRH (-m srh): an all-uSID chain carries none, and its segments are containers"
		}
	}
	return ""
}

func (c *Config) argsOrNil() map[string]string {
	if c == nil {
		return nil
	}
	return c.Args
}

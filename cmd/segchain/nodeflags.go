package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nsutil"
)

// nodeFlags name the node a per-node verb (sid, fw) acts on: a network
// namespace (--netns NS), or a lab node (--lab L --node N; --node alone
// means the default lab's node).
type nodeFlags struct {
	netns, lab, node string
}

func (f *nodeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.netns, "netns", "", "network namespace of the node (default: the current one)")
	fs.StringVar(&f.lab, "lab", "", "lab of --node (default: default, or $"+labEnv+")")
	fs.StringVar(&f.node, "node", "", "lab node (with --lab): its namespace instead of --netns")
}

// take removes --netns/--lab/--node (as "--flag V" or "--flag=V") from
// words anywhere on the line, for verbs that parse their own words (fw add,
// fw insert): no ip6tables rule word starts with these names.
func (f *nodeFlags) take(words []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		var dst *string
		var name string
		for _, c := range []struct {
			name string
			p    *string
		}{{"--netns", &f.netns}, {"--lab", &f.lab}, {"--node", &f.node}} {
			if w == c.name || strings.HasPrefix(w, c.name+"=") {
				dst, name = c.p, c.name
			}
		}
		switch {
		case dst == nil:
			rest = append(rest, w)
		case strings.HasPrefix(w, name+"="):
			*dst = strings.TrimPrefix(w, name+"=")
		case i+1 < len(words):
			*dst = words[i+1]
			i++
		default:
			return nil, fmt.Errorf("flag needs an argument: %s", name)
		}
	}
	return rest, nil
}

// resolve returns the namespace name ("" = the current one).
func (f *nodeFlags) resolve() (string, error) {
	switch {
	case f.node == "" && f.lab != "":
		return "", errors.New("--lab names the lab of --node: give --node NODE too (or --netns NS)")
	case f.node != "" && f.netns != "":
		return "", errors.New("give --netns NS or --lab L --node N, not both")
	case f.node != "":
		name := f.lab
		if name == "" {
			name = defaultLab()
		}
		l, err := getLab(name)
		if err != nil {
			return "", err
		}
		return l.Netns(f.node)
	}
	if f.netns != "" && !nsutil.Exists(f.netns) {
		// A node name where a namespace name belongs is the common slip.
		if l, err := lab.Get(defaultLab()); err == nil {
			if ns, err := l.Netns(f.netns); err == nil {
				return "", fmt.Errorf("no network namespace %q: for the lab node, give --node %s (namespace %s)", f.netns, f.netns, ns)
			}
		}
		return "", fmt.Errorf("no network namespace %q (ip netns list)", f.netns)
	}
	return f.netns, nil
}

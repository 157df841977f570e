package config

import (
	"fmt"
	"sort"
	"strings"
)

// FieldError is one problem in a domain file: its path
// (chains.web.services[1]), the YAML position when known (Line 0 when not)
// and the message.
type FieldError struct {
	Path string
	Line int
	Col  int
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
	} else {
		b.WriteString("(file)")
	}
	switch {
	case e.Line > 0 && e.Col > 0:
		fmt.Fprintf(&b, " (line %d:%d)", e.Line, e.Col)
	case e.Line > 0:
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a domain file. Error prints one per
// line, sorted by path (numbers in paths compare numerically).
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	l.Sort()
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Sort orders the list by path, then line, column and message.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if c := naturalCompare(a.Path, b.Path); c != 0 {
			return c < 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Msg < b.Msg
	})
}

// naturalCompare compares strings with runs of digits compared as numbers,
// so links[2] sorts before links[10].
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if na != nb {
				return strings.Compare(na, nb)
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

package perf

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestConsoleNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	c := NewConsole(&buf)
	bar := &Bar{W: c.Bar()}
	bar.Total(4)
	fmt.Fprintln(c, "run 1: log line")
	bar.Add(4)
	bar.Finish()
	if got := buf.String(); got != "run 1: log line\n" || strings.Contains(got, "\r") {
		t.Errorf("non-terminal output %q: want only the log line, no bar", got)
	}
}

func TestConsoleTerminal(t *testing.T) {
	var buf bytes.Buffer
	c := &Console{out: &buf, tty: true}
	bar := &Bar{W: c.Bar()}
	bar.Total(2)
	fmt.Fprintln(c, "log")
	got := buf.String()
	// The log line clears the bar's line, then the bar is redrawn below it.
	if !strings.Contains(got, "\r\x1b[Klog\n\r[") {
		t.Errorf("terminal output %q: the log line does not clear and redraw the bar", got)
	}
}

package perf

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Console is a run's stderr, shared by the log lines and the progress bar.
// On a terminal the bar is redrawn in place and every log line first
// clears it and then redraws it below, so the two never interleave. On
// anything else (a CI log, a file, a pipe) the bar is not drawn at all: no
// carriage returns end up in the log, only the log lines.
type Console struct {
	mu  sync.Mutex
	out io.Writer
	tty bool
	bar []byte // the bar as last drawn (terminal only)
}

// NewConsole wraps w; the bar is drawn only when w is a terminal.
func NewConsole(w io.Writer) *Console {
	return &Console{out: w, tty: IsTerminal(w)}
}

// IsTerminal reports whether w is a file open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Terminal reports whether the bar is drawn.
func (c *Console) Terminal() bool { return c.tty }

// Write prints log lines: on a terminal, above the bar.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && len(c.bar) > 0 {
		if _, err := io.WriteString(c.out, "\r\x1b[K"); err != nil {
			return 0, err
		}
	}
	n, err := c.out.Write(p)
	if err == nil && c.tty && len(c.bar) > 0 {
		_, err = c.out.Write(c.bar)
	}
	return n, err
}

// Bar returns the writer a Bar draws on.
func (c *Console) Bar() io.Writer { return barWriter{c} }

type barWriter struct{ c *Console }

// Write takes one drawing of the bar ("\r[###...] ..."), or the newline
// that ends it.
func (b barWriter) Write(p []byte) (int, error) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tty {
		return len(p), nil
	}
	if bytes.Equal(p, []byte("\n")) {
		c.bar = nil
	} else {
		c.bar = append(c.bar[:0], p...)
	}
	return c.out.Write(p)
}

package perf

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Bar is a one-line text progress bar with an ETA, redrawn in place with
// \r (for a terminal on stderr). It implements Progress.
//
// The ETA is the remaining steps at the pace measured since the first step
// completed: the time before it (testbed up, programs loaded, the first
// rule set compiled, generator warm-up) is paid once, and counting it in
// the pace made the early ETA several times too long.
type Bar struct {
	W     io.Writer
	Width int
	Now   func() time.Time // the clock (nil: time.Now); tests set a fake one
	mu    sync.Mutex
	total int
	done  int
	last  time.Time
	// The pace origin: when the first step completed and how many steps
	// were done then.
	first     time.Time
	firstDone int
}

func (b *Bar) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Bar) Total(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total, b.done, b.first, b.firstDone = n, 0, time.Time{}, 0
	b.draw(true)
}

func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if b.first.IsZero() {
		b.first, b.firstDone = b.now(), b.done
	}
	b.draw(false)
}

// ETA estimates the time left; ok is false until the pace is known (two
// steps completed).
func (b *Bar) ETA() (eta time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eta(b.now())
}

func (b *Bar) eta(now time.Time) (time.Duration, bool) {
	if b.first.IsZero() || b.done <= b.firstDone {
		return 0, false
	}
	per := now.Sub(b.first) / time.Duration(b.done-b.firstDone)
	return per * time.Duration(max(b.total-b.done, 0)), true
}

// Finish ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(true)
	fmt.Fprintln(b.W)
}

func (b *Bar) draw(force bool) {
	if b.W == nil || b.total <= 0 {
		return
	}
	now := b.now()
	if !force && now.Sub(b.last) < 200*time.Millisecond && b.done < b.total {
		return
	}
	b.last = now
	w := b.Width
	if w == 0 {
		w = 30
	}
	frac := min(float64(b.done)/float64(b.total), 1)
	fill := int(frac * float64(w))
	eta := "?"
	if rem, ok := b.eta(now); ok {
		eta = rem.Round(time.Second).String()
	}
	fmt.Fprintf(b.W, "\r[%s%s] %3.0f%% %d/%d ETA %s   ", strings.Repeat("#", fill), strings.Repeat(".", w-fill), 100*frac, b.done, b.total, eta)
}

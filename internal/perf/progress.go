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
type Bar struct {
	W     io.Writer
	Width int
	mu    sync.Mutex
	total int
	done  int
	start time.Time
	last  time.Time
}

func (b *Bar) Total(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total, b.done, b.start = n, 0, time.Now()
	b.draw(true)
}

func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	b.draw(false)
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
	now := time.Now()
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
	if b.done > 0 {
		el := now.Sub(b.start)
		rem := time.Duration(float64(el) * (1/frac - 1))
		eta = rem.Round(time.Second).String()
	}
	fmt.Fprintf(b.W, "\r[%s%s] %3.0f%% %d/%d ETA %s   ", strings.Repeat("#", fill), strings.Repeat(".", w-fill), 100*frac, b.done, b.total, eta)
}

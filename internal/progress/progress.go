// Package progress shows how long work is going: a one-line bar with rate
// and ETA, redrawn in place on a terminal and printed as a plain line every
// few seconds otherwise (logs, CI).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar tracks done/total units of one phase. Safe for concurrent use.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	label    string
	unit     string
	total    int
	done     int
	extra    string
	start    time.Time
	last     time.Time
	every    time.Duration
	finished bool
	drawn    int // done at the last draw (-1: never drawn)
	now      func() time.Time
}

// New starts a bar writing to w (usually os.Stderr). total may be 0 when
// unknown (no ETA then).
func New(w io.Writer, label, unit string, total int) *Bar {
	b := &Bar{w: w, label: label, unit: unit, total: total, every: 5 * time.Second, now: time.Now, drawn: -1}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
			b.every = 200 * time.Millisecond
		}
	}
	b.start = b.now()
	return b
}

// Set records progress; extra is appended to the line (e.g. "calls 96 (24/s)").
func (b *Bar) Set(done int, extra string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.extra = done, extra
	now := b.now()
	if now.Sub(b.last) < b.every && done < b.total {
		return
	}
	b.last = now
	b.draw(now)
}

// Finish prints the final line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	if b.drawn != b.done || b.tty {
		b.draw(b.now())
	}
	if b.tty {
		fmt.Fprintln(b.w)
	}
}

// Line renders the current state (exported for tests and logs).
func (b *Bar) Line() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.line(b.now())
}

func (b *Bar) line(now time.Time) string {
	el := now.Sub(b.start)
	rate := 0.0
	if el > 0 {
		rate = float64(b.done) / el.Seconds()
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s ", b.label)
	if b.total > 0 {
		const width = 20
		fill := min(width, b.done*width/b.total)
		fmt.Fprintf(&s, "[%s%s] %d/%d %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), b.done, b.total, b.unit)
	} else {
		fmt.Fprintf(&s, "%d %s", b.done, b.unit)
	}
	fmt.Fprintf(&s, " %.2f/s elapsed %s", rate, el.Round(time.Second))
	if b.total > 0 && b.done < b.total && rate > 0 {
		eta := time.Duration(float64(b.total-b.done) / rate * float64(time.Second))
		fmt.Fprintf(&s, " ETA %s", eta.Round(time.Second))
	}
	if b.extra != "" {
		s.WriteString(" · ")
		s.WriteString(b.extra)
	}
	return s.String()
}

func (b *Bar) draw(now time.Time) {
	b.drawn = b.done
	l := b.line(now)
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", l)
	} else {
		fmt.Fprintln(b.w, l)
	}
}

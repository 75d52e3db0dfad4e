package scheduler

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton"
)

// Bounds on a run's output in the daemon's log (output: log), so that a
// chatty job cannot flood it: a line longer than OutputLineMax bytes is cut
// there (the line says how much was cut), and each run may log
// OutputLinesBurst lines at once and OutputLinesPerSecond a second after
// that; the lines beyond are dropped, and one line says how many.
const (
	OutputLineMax        = 4096
	OutputLinesBurst     = 1000
	OutputLinesPerSecond = 100
)

// outcomeLevel is the level a run's or tick's end is logged at: a run that
// did not do its work is a warning (journalctl -p warning shows it), one
// whose write may or may not have happened an error, since someone must
// find out which; successes and skips are information.
func outcomeLevel(o baton.Outcome) slog.Level {
	switch o {
	case baton.OutcomeUnknown:
		return slog.LevelError
	case baton.OutcomeFailed, baton.OutcomeTimedOut, baton.OutcomeLostLease, baton.OutcomeFenced:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// runOutput logs one run's output, line by line, each line with the
// stream it came from, within the run's line budget.
type runOutput struct {
	log *slog.Logger

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

func newRunOutput(log *slog.Logger) *runOutput {
	return &runOutput{log: log, tokens: OutputLinesBurst, last: time.Now()}
}

// stream returns the writer for one of the run's streams; Close it at the
// end of the stream to log a last line without its newline.
func (o *runOutput) stream(name string) *lineWriter {
	return &lineWriter{out: o, stream: name}
}

// line logs one line of stream, or counts it dropped when the run's
// budget is spent; the first line logged after drops is preceded by how
// many were dropped.
func (o *runOutput) line(stream string, text []byte, cut int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.tokens = min(o.tokens+now.Sub(o.last).Seconds()*OutputLinesPerSecond, OutputLinesBurst)
	o.last = now
	if o.tokens < 1 {
		o.dropped++
		return
	}
	o.tokens--
	o.flushDropped()
	msg := string(text)
	if cut > 0 {
		msg += fmt.Sprintf(" …[%d bytes cut]", cut)
	}
	o.log.Info(msg, "stream", stream)
}

// flushDropped logs how many lines were dropped since the last time.
func (o *runOutput) flushDropped() {
	if o.dropped == 0 {
		return
	}
	o.log.Info(fmt.Sprintf("%d lines of output dropped", o.dropped), "dropped_lines", o.dropped,
		"limit", fmt.Sprintf("%d lines at once, then %d a second", OutputLinesBurst, OutputLinesPerSecond))
	o.dropped = 0
}

// done logs the drops not yet reported; call it when every stream is closed.
func (o *runOutput) done() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushDropped()
}

// lineWriter splits one stream into lines for runOutput, keeping at most
// OutputLineMax bytes of each.
type lineWriter struct {
	out    *runOutput
	stream string
	buf    []byte
	cut    int // bytes of the current line beyond OutputLineMax
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		room := OutputLineMax - len(w.buf)
		if len(chunk) > room {
			w.buf = append(w.buf, chunk[:room]...)
			w.cut += len(chunk) - room
		} else {
			w.buf = append(w.buf, chunk...)
		}
		if i < 0 {
			break
		}
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

// Close logs what is left of the stream's last line.
func (w *lineWriter) Close() error {
	if len(w.buf) > 0 || w.cut > 0 {
		w.emit()
	}
	return nil
}

func (w *lineWriter) emit() {
	line := bytes.TrimSuffix(w.buf, []byte("\r"))
	cut := w.cut
	if cut > 0 {
		// Cut at a character's boundary, not inside it.
		for k := 0; k < utf8.UTFMax && len(line) > 0 && !utf8.Valid(line); k++ {
			line = line[:len(line)-1]
			cut++
		}
	}
	w.out.line(w.stream, line, cut)
	w.buf, w.cut = w.buf[:0], 0
}

// copyOutput copies r to every w until r ends, then closes r.
func copyOutput(r io.ReadCloser, w ...io.Writer) {
	io.Copy(io.MultiWriter(w...), r)
	r.Close()
}

// captureOutput makes the writers a run's stdout and stderr go to, per the
// job's output mode: both into tail, and with output: log also line by
// line into the daemon's log, each stream through a pipe of its own so
// that its lines say which stream they came from. copied is closed when
// everything the writers were given has been copied (once closeOutput has
// closed them and every process holding them has exited).
func (d *Daemon) captureOutput(j baton.Job, t baton.Tick, attempt int, tail io.Writer) (stdout, stderr io.Writer, copied chan struct{}, err error) {
	copied = make(chan struct{})
	switch j.OutputMode() {
	case baton.OutputDiscard:
		close(copied)
		return nil, nil, copied, nil // the supervisor connects them to /dev/null
	case baton.OutputTail:
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, nil, err
		}
		go func() { copyOutput(r, tail); close(copied) }()
		return w, w, copied, nil
	}
	rOut, wOut, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	rErr, wErr, err := os.Pipe()
	if err != nil {
		rOut.Close()
		wOut.Close()
		return nil, nil, nil, err
	}
	out := newRunOutput(d.Log.With("job", j.Name, "tick", baton.FormatTick(t.At), "attempt", attempt))
	var wg sync.WaitGroup
	for _, s := range []struct {
		r    *os.File
		name string
	}{{rOut, "stdout"}, {rErr, "stderr"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines := out.stream(s.name)
			copyOutput(s.r, tail, lines)
			lines.Close()
		}()
	}
	go func() { wg.Wait(); out.done(); close(copied) }()
	return wOut, wErr, copied, nil
}

// closeOutput closes the daemon's ends of the writers captureOutput made.
func closeOutput(stdout, stderr io.Writer) {
	for _, w := range []io.Writer{stdout, stderr} {
		if f, ok := w.(*os.File); ok {
			f.Close() // the second Close of one shared pipe is a harmless error
		}
	}
}

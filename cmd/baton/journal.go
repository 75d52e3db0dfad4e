package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// logFormatUsage describes --log-format, the same for daemon and relay.
const logFormatUsage = "text, json, journal, or auto (journal when stderr is systemd's journal, text on a terminal, JSON otherwise)"

// toJournal says whether w is the stream systemd connected to the journal:
// $JOURNAL_STREAM holds that stream's device and inode, and a process whose
// stderr went elsewhere (a redirect in a unit's shell, a job's own file)
// inherits the variable but not the stream.
func toJournal(w io.Writer, getenv func(string) string) bool {
	f, ok := w.(*os.File)
	want := getenv("JOURNAL_STREAM")
	if !ok || want == "" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return want == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// journalHandler logs text lines, each prefixed with its syslog priority as
// sd-daemon(3) describes ("<3>" error, "<4>" warning, "<6>" info, "<7>"
// debug), which journald strips and records as the entry's PRIORITY. The
// journal stamps each entry itself, so the lines carry no time.
func journalHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewTextHandler(&priorityWriter{w: w}, journalHandlerOptions(level))
}

func journalHandlerOptions(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return seconds(groups, a)
		},
	}
}

// priorityWriter prefixes each record's line with its priority. A text
// handler writes one record per Write, starting with its level (the time
// is dropped): "level=WARN msg=…".
type priorityWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(append(p.buf[:0], journalPriority(b)...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

// journalPriority maps a line's slog level to a syslog priority; levels
// between the named ones (INFO+2) take the priority of the one below.
func journalPriority(line []byte) string {
	level, _, _ := bytes.Cut(bytes.TrimPrefix(line, []byte("level=")), []byte(" "))
	switch {
	case bytes.HasPrefix(level, []byte("ERROR")):
		return "<3>"
	case bytes.HasPrefix(level, []byte("WARN")):
		return "<4>"
	case bytes.HasPrefix(level, []byte("DEBUG")):
		return "<7>"
	}
	return "<6>"
}

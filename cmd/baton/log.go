package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton"
)

// logLevelUsage describes --log-level, the same for daemon and relay.
const logLevelUsage = "least severe lines to log: debug, info, warn or error"

// newLogger makes the daemon's logger: lines with priorities when stderr is
// systemd's journal, text on a terminal, JSON otherwise, unless format says
// which; lines below level are left out. Every duration is logged as
// seconds (see seconds).
func newLogger(w io.Writer, format, level string, getenv func(string) string) (*slog.Logger, error) {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, baton.Invalid("--log-level", "%q: want debug, info, warn or error", level)
	}
	switch format {
	case "auto":
		format = "json"
		if f, ok := w.(*os.File); ok {
			if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
				format = "text"
			}
		}
		if toJournal(w, getenv) {
			format = "journal"
		}
	case "text", "json", "journal":
	default:
		return nil, baton.Invalid("--log-format", "%q: want text, json, journal or auto", format)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: seconds}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "journal":
		return slog.New(journalHandler(w, lv)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// seconds logs a duration as seconds, a number, under its key with
// "_seconds" added ("grace_seconds":30, not "grace":30000000000 as
// slog's JSON has it, nor "grace=30s" that a machine must parse), in every
// format, so that a query of the log names the same key whatever the
// format. It is the one place that does this: log a time.Duration as it
// is, and it comes out right.
func seconds(_ []string, a slog.Attr) slog.Attr {
	var d time.Duration
	switch v := a.Value.Any().(type) {
	case time.Duration:
		d = v
	case baton.Duration:
		d = v.D()
	default:
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_seconds") {
		key += "_seconds"
	}
	return slog.Float64(key, d.Seconds())
}

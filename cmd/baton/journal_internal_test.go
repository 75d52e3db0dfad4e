package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Each level gets the syslog priority sd-daemon(3) names, one line per
// record, without a time (the journal stamps entries).
func TestJournalPriorities(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(journalHandler(&b, slog.LevelInfo)).With("job", "j")
	log.Error("e", "err", "multi\nline")
	log.Warn("w")
	log.Info("i")
	log.Log(t.Context(), slog.LevelInfo+2, "between")
	log.Debug("not shown at the default level")
	want := []string{
		`<3>level=ERROR msg=e job=j err="multi\nline"`,
		`<4>level=WARN msg=w job=j`,
		`<6>level=INFO msg=i job=j`,
		`<6>level=INFO+2 msg=between job=j`,
	}
	if got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b.Reset()
	slog.New(slog.NewTextHandler(&priorityWriter{w: &b}, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: journalHandlerOptions(slog.LevelDebug).ReplaceAttr})).Debug("d")
	if b.String() != "<7>level=DEBUG msg=d\n" {
		t.Errorf("debug: %q", b.String())
	}
}

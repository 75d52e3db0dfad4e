package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// journalStream is $JOURNAL_STREAM for f, as systemd sets it when f is the
// service's stderr: the device and inode of the stream.
func journalStream(t *testing.T, f *os.File) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)
}

// Under systemd, with stderr connected to the journal ($JOURNAL_STREAM names
// it), the daemon logs text lines with the syslog priority journald reads
// ("<6>" info, "<3>" error; sd-daemon(3)), not JSON.
func TestDaemonLogsForTheJournal(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	config := writeJobFile(t, "jobs:\n  - name: tick\n    schedule: \"* * * * * *\"\n    command: \"true\"\n")
	logPath := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.env = append(s.env, journalStream(t, f))
	cmd := s.command(context.Background(), "daemon", "--config", config, "--poll", "50ms")
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logged := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			b, _ := os.ReadFile(logPath)
			if strings.Contains(string(b), what) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log within a minute:\n%s", what, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	logged("run end")
	// A reload of an invalid file is refused, at ERROR.
	if err := os.WriteFile(config, []byte("jobs: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	logged("reload refused")
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	b, _ := os.ReadFile(logPath)
	prios := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if len(line) < 4 || line[0] != '<' || line[2] != '>' || !strings.Contains(line, "level=") {
			t.Fatalf("not a journal line: %q\nlog:\n%s", line, b)
		}
		prio := line[:3]
		prios[prio] = true
		switch {
		case strings.Contains(line, "msg=starting"), strings.Contains(line, "msg=\"run end\""):
			if prio != "<6>" {
				t.Errorf("INFO line with priority %s: %q", prio, line)
			}
		case strings.Contains(line, "reload refused"):
			if prio != "<3>" {
				t.Errorf("ERROR line with priority %s: %q", prio, line)
			}
		}
	}
	if !prios["<6>"] || !prios["<3>"] {
		t.Errorf("priorities seen %v, want <6> and <3>", prios)
	}
}

// An explicit --log-format wins over the journal; and $JOURNAL_STREAM
// inherited by a process whose stderr went elsewhere is not the journal.
func TestLogFormatUnderJournal(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	other, err := os.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, c := range []struct {
		name   string
		stream bool // JOURNAL_STREAM names the stderr
		args   []string
		want   string // the first byte of every line
	}{
		{"journal", true, nil, "<"},
		{"explicit json", true, []string{"--log-format", "json"}, "{"},
		{"explicit text", true, []string{"--log-format", "text"}, "t"}, // time=…
		{"stderr elsewhere", false, nil, "{"},
		{"explicit journal", false, []string{"--log-format", "journal"}, "<"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		stream := journalStream(t, other)
		if c.stream {
			stream = journalStream(t, f)
		}
		cmd := s.command(context.Background(), append([]string{"relay", "--sink", "noop:", "--until-idle"}, c.args...)...)
		cmd.Env = append(cmd.Env, stream)
		cmd.Stderr = f
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		f.Close()
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, line := range lines {
			if !strings.HasPrefix(line, c.want) {
				t.Errorf("%s: line %q, want it to start with %q", c.name, line, c.want)
			}
		}
		if len(lines) < 2 {
			t.Errorf("%s: log %q, want the relay's start and idle lines", c.name, b)
		}
	}
}

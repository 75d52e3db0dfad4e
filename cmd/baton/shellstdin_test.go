package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Through the daemon: a job's stdin: reaches its command; the file's
// defaults shell: /bin/bash runs a string command under bash (a bash-only
// test, which /bin/sh refuses), and a job's own shell: /bin/sh wins over
// it; a list-form command is found on the PATH of the job's env.
func TestDaemonShellStdinAndPath(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	out, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "report"), []byte("#!/bin/sh\necho \"report $1\" > \"$2.tmp\" && mv \"$2.tmp\" \"$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := writeJobFile(t, fmt.Sprintf(`
defaults:
  shell: /bin/bash
jobs:
  - name: fed
    schedule: "@every 1s"
    shell: /bin/sh
    stdin: |
      hello from stdin
    command: cat > %[1]s/fed.tmp && mv %[1]s/fed.tmp %[1]s/fed
  - name: bashed
    schedule: "@every 1s"
    command: if [[ -n "$BASH_VERSION" ]]; then echo bash > %[1]s/bashed.tmp; else echo other > %[1]s/bashed.tmp; fi; mv %[1]s/bashed.tmp %[1]s/bashed
  - name: on-path
    schedule: "@every 1s"
    env: {PATH: "%[2]s:/usr/bin:/bin"}
    command: [report, --daily, %[1]s/report]
`, out, bin))
	d := s.startDaemon(t, "d", config)
	if got := waitFile(t, filepath.Join(out, "fed"), 20*time.Second); got != "hello from stdin" {
		t.Errorf("fed read %q from its stdin, want %q", got, "hello from stdin")
	}
	if got := waitFile(t, filepath.Join(out, "bashed"), 20*time.Second); got != "bash" {
		t.Errorf("bashed ran under %q, want bash", got)
	}
	if got := waitFile(t, filepath.Join(out, "report"), 20*time.Second); got != "report --daily" {
		t.Errorf("on-path wrote %q, want %q", got, "report --daily")
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exited %d, want 0", code)
	}
}

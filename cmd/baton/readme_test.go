package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's "Try it" works as written on a fresh machine, for root and
// for an ordinary user: the host lock directory (/var/lib/baton/locks)
// needs root's one-time set-up, so the demo uses a throwaway one. The go
// build is done by the test harness; the rest of the line runs as it is.
func TestReadmeTryIt(t *testing.T) {
	needRoot(t)
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```sh\n")
	line, _, _ := strings.Cut(block, "\n")
	const build = "go build -o . ./cmd/baton ./cmd/baton-guard && "
	if !ok || !strings.HasPrefix(line, build) {
		t.Fatalf("the README's first command %q does not start with %q", line, build)
	}
	line = strings.TrimPrefix(line, build)
	for _, uid := range []int{0, 60007} {
		dir := userDir(t, uid, uid)
		bin, err := os.ReadFile(batonBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "baton"), bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if bin, err = os.ReadFile(guardBin()); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "baton-guard"), bin, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GORACE=atexit_sleep_ms=0"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("uid %d: %v\n%s", uid, err, out.String())
		}
		// One run, the other refused. On a loaded box the second may
		// start before the first, despite the demo's sleep 0.5.
		o := out.String()
		ran := strings.Count(o, "first run: token 1\n") + strings.Count(o, "second run\n")
		if ran != 1 || !strings.Contains(o, "its lease is held") {
			t.Errorf("uid %d: output %q; want one run and one refused", uid, o)
		}
	}
}

package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
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

// The README's quick starts run as written, on this machine, with only the
// adaptations each test lists: what needs root, apt, a real PostgreSQL
// server's host or a mail server is replaced, line by line, by what the
// test has (its own binaries, a throwaway lock directory, the harness's
// database, a sendmail that appends to a file). Each adaptation must still
// find its text in the README: a quick start that changes is run as it is
// now, or the test says which adaptation no longer applies.

// readmeBlock is one fenced block of the README: its language and text.
type readmeBlock struct{ lang, text string }

// quickStart returns the fenced blocks of the README's section whose
// heading starts with heading, up to the next heading of its level or above.
func quickStart(t *testing.T, heading string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading)
	if !ok {
		t.Fatalf("the README has no heading %q", heading)
	}
	section = cutAtHeading(section)
	var blocks []readmeBlock
	for {
		_, rest, ok := strings.Cut(section, "\n```")
		if !ok {
			break
		}
		lang, rest, _ := strings.Cut(rest, "\n")
		text, after, ok := strings.Cut(rest, "\n```")
		if !ok {
			t.Fatalf("README, %s: a block is not closed", heading)
		}
		blocks = append(blocks, readmeBlock{lang, text + "\n"})
		section = after
	}
	return blocks
}

// cutAtHeading returns s up to its first heading of level 3 or above.
func cutAtHeading(s string) string {
	inCode := false
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if i == 0 {
			continue
		}
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if !inCode && (strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "### ")) {
			return strings.Join(lines[:i], "")
		}
	}
	return s
}

// adaptation replaces text of a quick start by what the test can run.
type adaptation struct{ old, new, why string }

func adapt(t *testing.T, script string, adaptations []adaptation) string {
	t.Helper()
	for _, a := range adaptations {
		if !strings.Contains(script, a.old) {
			t.Fatalf("the quick start no longer has %q (adapted because %s): update the test with the README", a.old, a.why)
		}
		script = strings.ReplaceAll(script, a.old, a.new)
	}
	return script
}

// crontabScript turns a crontab into the shell lines cron would run:
// VAR=value lines are exported, and each schedule line's command (after
// its five time fields) is run by sh -c, as cron runs it.
func crontabScript(t *testing.T, crontab string) string {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(crontab, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, _, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(name, " \t") {
			sb.WriteString("export " + line + "\n")
			continue
		}
		cmd := line
		for range 5 {
			i := strings.IndexAny(cmd, " \t")
			if i < 0 {
				t.Fatalf("crontab line %q: not five time fields and a command", line)
			}
			cmd = strings.TrimLeft(cmd[i:], " \t")
		}
		sb.WriteString("sh -c " + shellQuote(cmd) + "\n")
	}
	return sb.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// binDir makes a directory holding the test's baton and baton-guard.
func binDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, src := range []string{batonBin, guardBin()} {
		if err := os.Symlink(src, filepath.Join(dir, filepath.Base(src))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runScript runs script with bash -e in dir, in a process group of its
// own that is killed if it outlives the deadline.
func runScript(t *testing.T, dir, script string, env []string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return out.String(), err
}

// Quick start (a): the crontab line runs its command under baton, and
// baton leases shows the job's lease afterwards.
func TestReadmeQuickStartOneHost(t *testing.T) {
	t.Parallel()
	blocks := quickStart(t, "### (a) ")
	if len(blocks) != 3 || blocks[0].lang != "sh" || blocks[1].lang != "crontab" || blocks[2].lang != "sh" {
		t.Fatalf("quick start (a): want blocks sh, crontab, sh; got %+v", blocks)
	}
	dir := t.TempDir()
	bin := binDir(t)
	ran := filepath.Join(dir, "report.ran")
	if err := os.WriteFile(filepath.Join(bin, "report"), []byte("#!/bin/sh\necho \"report $*\" >> "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := blocks[0].text + crontabScript(t, blocks[1].text) + blocks[2].text
	script = adapt(t, script, []adaptation{
		{`go install github.com/batonhq/baton/cmd/...@latest && sudo install "$(go env GOPATH)"/bin/baton "$(go env GOPATH)"/bin/baton-guard /usr/local/bin/`, "",
			"the test built baton and baton-guard, and puts them where /usr/local/bin is below"},
		{`sudo baton setup local --user "$USER"`, `export BATON_LOCK_DIR="$PWD/locks" # adapted`,
			"setup local needs root and changes the host's groups: the test uses a throwaway lock directory, as Try it does"},
		{"/usr/local/bin", bin, "the test's binaries and its report command are there"},
	})
	out, err := runScript(t, dir, script, []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GORACE=atexit_sleep_ms=0"}, 2*time.Minute)
	if err != nil {
		t.Fatalf("quick start (a): %v\n--- script\n%s--- output\n%s", err, script, out)
	}
	t.Logf("quick start (a), as run:\n%s--- output\n%s", script, out)
	b, _ := os.ReadFile(ran)
	if got := strings.Count(string(b), "report --daily\n"); got != 2 {
		t.Errorf("quick start (a): the report ran %d times, want 2 (the crontab's line and the run by hand)\n%s", got, out)
	}
	if !strings.Contains(out, "exit status 0\n") || !regexp.MustCompile(`(?m)^report\s+free\s+2\b`).MatchString(out) {
		t.Errorf("quick start (a): want the run's exit status 0 and baton leases showing report free at token 2:\n%s", out)
	}
}

// Quick start (b): two daemons on the test's PostgreSQL share the ticks,
// the failing job's failure reaches the mailbox, the dashboard is ready.
func TestReadmeQuickStartFleet(t *testing.T) {
	t.Parallel()
	blocks := quickStart(t, "### (b) ")
	var script string
	for _, b := range blocks {
		if b.lang != "sh" {
			t.Fatalf("quick start (b): a %q block; want sh only", b.lang)
		}
		script += b.text
	}
	dir := t.TempDir()
	bin := binDir(t)
	mbox := filepath.Join(dir, "mbox")
	sendmail := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sendmail, []byte("#!/bin/sh\n{ echo \"From baton $*\"; cat; echo; } >> "+mbox+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	script = adapt(t, script, []adaptation{
		{"sudo apt install ./baton_1.2.0_amd64.deb", "", "the test built baton and baton-guard, on its PATH"},
		{`sudo -u postgres psql -c "create role baton login password 'secret'" -c "create database baton owner baton"`, "",
			"the test harness (internal/pgtest) made the test's own database"},
		{"'postgres://baton:secret@db.internal:5432/baton'", shellQuote(pgtest.DSN(t)), "the test's database"},
		{"/usr/sbin/sendmail", sendmail, "no mail server here: the test's sendmail appends each message to a file"},
		{"127.0.0.1:8080", addr, "a free port, as tests run in parallel"},
	})
	out, err := runScript(t, dir, script, []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "GORACE=atexit_sleep_ms=0"}, 3*time.Minute)
	if err != nil {
		t.Fatalf("quick start (b): %v\n--- script\n%s--- output\n%s", err, script, out)
	}
	t.Logf("quick start (b), as run:\n%s--- output\n%s", script, out)
	for _, want := range []string{"broken", "failed", "report", "succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("quick start (b): the output lacks %q:\n%s", want, out)
		}
	}
	mail, _ := os.ReadFile(mbox)
	if !strings.Contains(string(mail), "To: ops@example.com") || !strings.Contains(string(mail), "Subject: [baton] broken failed on ") ||
		!strings.Contains(string(mail), "disk full") {
		t.Errorf("quick start (b): no failure mail for broken to ops@example.com:\n%s\n--- output\n%s", mail, out)
	}
}

// Quick start (c): three replicas at once write the report once; a replica
// frozen mid-work is taken over, and its late write is refused. The program
// is built against this checkout (a replace directive) instead of the
// module's latest release.
func TestReadmeQuickStartGo(t *testing.T) {
	t.Parallel()
	blocks := quickStart(t, "### (c) ")
	var script string
	for _, b := range blocks {
		if b.lang != "sh" {
			t.Fatalf("quick start (c): a %q block; want sh only", b.lang)
		}
		script += b.text
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is needed to build quick start (c)")
	}
	script = adapt(t, script, []adaptation{
		{"go get github.com/batonhq/baton@latest",
			"go mod edit -require=github.com/batonhq/baton@v0.0.0 -replace=github.com/batonhq/baton=" + shellQuote(repo),
			"the test builds against this checkout, not a release"},
		{"go build -o report .", "go mod tidy && go build -o report .", "the replace directive needs its requirements resolved (go get did that)"},
		{"sleep 2; kill -STOP $a", `until baton leases | grep -q ":$a "; do sleep 0.1; done; kill -STOP $a`,
			"a busy machine may take more than 2 s to start A: freeze it once it holds the lease"},
	})
	dir := t.TempDir()
	env := []string{
		"PATH=" + binDir(t) + ":" + filepath.Dir(gobin) + ":/usr/bin:/bin",
		"HOME=" + dir,
		"BATON_DB=" + asURL(t, pgtest.DSN(t)),
		"GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"),
		"GOPROXY=" + goEnv(t, "GOPROXY"), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
	}
	out, err := runScript(t, dir, script, env, 5*time.Minute)
	if err != nil {
		t.Fatalf("quick start (c): %v\n--- script\n%s--- output\n%s", err, script, out)
	}
	t.Logf("quick start (c), as run:\n%s--- output\n%s", script, out)
	if n := strings.Count(out, ": wrote the report, token "); n != 2 {
		t.Errorf("quick start (c): %d reports written, want 2 (one of the three at once, and B's):\n%s", n, out)
	}
	if n := strings.Count(out, ": busy, another replica writes the report"); n != 2 {
		t.Errorf("quick start (c): %d replicas busy, want 2:\n%s", n, out)
	}
	if !regexp.MustCompile(`pid \d+: lost the lease, nothing written: .*lease`).MatchString(out) {
		t.Errorf("quick start (c): the frozen replica A did not say it lost the lease:\n%s", out)
	}
}

// goEnv is go env NAME, for a script that runs go with a clean environment.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

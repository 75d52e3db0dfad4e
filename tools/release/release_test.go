package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/supervise/guard"
)

// The documented release command builds a static baton and a .deb that
// holds every file docs/INSTALL.md lists, with the conffiles marked, and
// units that systemd-analyze verify accepts where it is installed.
func TestReleaseDeb(t *testing.T) {
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Fatal("dpkg-deb is needed to check the .deb: apt-get install dpkg")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const version = "v1.2.3-rc.1"
	arch := runtime.GOARCH
	cmd := exec.Command("go", "run", "./tools/release", "-version", version, "-arch", arch, "-out", out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./tools/release: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "baton-"+version+"-linux-"+arch)
	guard := filepath.Join(out, "baton-guard-"+version+"-linux-"+arch)
	deb := filepath.Join(out, "baton_1.2.3-rc.1_"+arch+".deb")
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"SHA256SUMS", filepath.Base(guard), filepath.Base(bin), filepath.Base(deb)}; !slices.Equal(names, want) {
		t.Fatalf("dist holds %q, want %q", names, want)
	}
	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = out
	if b, err := sums.CombinedOutput(); err != nil || strings.Count(string(b), ": OK") != 3 {
		t.Errorf("sha256sum --check: %v\n%s", err, b)
	}

	checkStatic(t, bin)
	checkStatic(t, guard)

	contents, err := exec.Command(dpkgDeb, "--contents", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v", err)
	}
	t.Logf("dpkg-deb --contents %s:\n%s", filepath.Base(deb), contents)
	// The bash completion is read only where bash-completion is installed.
	if rec, err := exec.Command(dpkgDeb, "--field", deb, "Recommends").Output(); err != nil || !strings.Contains(string(rec), "bash-completion") {
		t.Errorf("the .deb's Recommends: %q (%v), want bash-completion", rec, err)
	}
	// "-rw-r--r-- root/root  1234 2026-12-02 04:00 ./usr/bin/baton"
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || strings.HasPrefix(fields[0], "d") {
			continue
		}
		files[strings.TrimPrefix(fields[5], ".")] = fields[0] + " " + fields[1]
	}
	want := map[string]string{
		"/usr/bin/baton":                                  "-rwxr-xr-x root/root",
		"/usr/bin/baton-guard":                            "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/baton.service":           "-rw-r--r-- root/root",
		"/usr/lib/systemd/system/baton-relay.service":     "-rw-r--r-- root/root",
		"/usr/share/baton/baton-root.conf":                "-rw-r--r-- root/root",
		"/usr/lib/sysusers.d/baton.conf":                  "-rw-r--r-- root/root",
		"/usr/lib/tmpfiles.d/baton.conf":                  "-rw-r--r-- root/root",
		"/etc/baton/baton.env":                            "-rw-r----- root/root",
		"/etc/baton/jobs.yaml":                            "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/baton":    "-rw-r--r-- root/root",
		"/usr/share/zsh/vendor-completions/_baton":        "-rw-r--r-- root/root",
		"/usr/share/fish/vendor_completions.d/baton.fish": "-rw-r--r-- root/root",
		"/usr/share/doc/baton/copyright":                  "-rw-r--r-- root/root",
		"/usr/share/doc/baton/INSTALL.md":                 "-rw-r--r-- root/root",
		"/usr/share/man/man1/baton.1.gz":                  "-rw-r--r-- root/root",
		"/usr/share/man/man5/baton-jobs.5.gz":             "-rw-r--r-- root/root",
	}
	// A man page for every command that 'baton --help' lists.
	help, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(help), "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	for _, m := range regexp.MustCompile(`(?m)^  (\S+) `).FindAllStringSubmatch(list, -1) {
		want["/usr/share/man/man1/baton-"+m[1]+".1.gz"] = "-rw-r--r-- root/root"
	}
	if len(want) < 20 {
		t.Fatalf("baton --help lists too few commands:\n%s", help)
	}
	for path, mode := range want {
		if got, ok := files[path]; !ok {
			t.Errorf("the .deb has no %s", path)
		} else if got != mode {
			t.Errorf("%s: %s, want %s", path, got, mode)
		}
	}
	for path := range files {
		if _, ok := want[path]; !ok {
			t.Errorf("the .deb has %s, which the test (and docs/INSTALL.md) does not list", path)
		}
	}
	// docs/INSTALL.md lists the same files.
	listed := installMDFiles(t, filepath.Join(root, "docs/INSTALL.md"))
	for path := range files {
		if !listed[path] {
			t.Errorf("the .deb has %s, which docs/INSTALL.md (\"What it installs\") does not list", path)
		}
	}
	for path := range listed {
		if _, ok := files[path]; !ok {
			t.Errorf("docs/INSTALL.md lists %s, which the .deb does not have", path)
		}
	}

	conffiles, err := exec.Command(dpkgDeb, "--info", deb, "conffiles").Output()
	if got := strings.Fields(string(conffiles)); err != nil || !slices.Equal(got, []string{"/etc/baton/baton.env", "/etc/baton/jobs.yaml"}) {
		t.Errorf("conffiles: %v %q", err, conffiles)
	}
	fields, err := exec.Command(dpkgDeb, "--field", deb, "Package", "Version", "Architecture").Output()
	if err != nil || string(fields) != "Package: baton\nVersion: 1.2.3~rc.1\nArchitecture: "+arch+"\n" {
		t.Errorf("control fields: %v %q", err, fields)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		if b, err := exec.Command(dpkgDeb, "--info", deb, script).Output(); err != nil || !strings.HasPrefix(string(b), "#!/bin/sh") {
			t.Errorf("%s: %v %q", script, err, b)
		}
	}

	// The packaged baton names its release and commit.
	tree := filepath.Join(t.TempDir(), "root")
	if b, err := exec.Command(dpkgDeb, "-x", deb, tree).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, b)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Revision string }
	b, err := exec.Command(filepath.Join(tree, "usr/bin/baton"), "version", "--json").Output()
	if err := json.Unmarshal(b, &v); err != nil || v.Version != version || v.Revision != strings.TrimSpace(string(head)) {
		t.Errorf("the packaged baton version --json: %v %s", err, b)
	}
	checkCGuard(t, filepath.Join(tree, "usr/bin/baton-guard"))
	checkJobsPage(t, tree, version)
	// The packaged baton guards its runs with the packaged baton-guard:
	// both speak one guard protocol.
	run := exec.Command(filepath.Join(tree, "usr/bin/baton"), "run", "--lock-dir", t.TempDir(), "demo", "--", "sh", "-c", "readlink /proc/$PPID/exe")
	if b, err := run.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != filepath.Join(tree, "usr/bin/baton-guard") {
		t.Errorf("the packaged baton run: %v; the command's parent %q, want the packaged baton-guard", err, b)
	}

	t.Run("systemd-analyze verify", func(t *testing.T) {
		sa, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Fatal("systemd-analyze is not installed: the units cannot be verified (apt-get install systemd, or run ./test.sh as root)")
		}
		verifyUnits(t, sa, tree)
	})
}

// installMDFiles reads the files that docs/INSTALL.md says the .deb
// installs: the paths in the first column of the table under "What it
// installs", where baton-COMMAND.1.gz stands for a page of each command
// of the list that follows it ("`baton-backfill`, `-bench`, … and
// `-version`").
func installMDFiles(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n### What it installs\n")
	section, _, _ = strings.Cut(section, "\n### ")
	code := regexp.MustCompile("`([^`]+)`")
	listed := map[string]bool{}
	perCommand := ""
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			switch {
			case strings.HasPrefix(m[1], "/"):
				listed[m[1]] = true
			case strings.Contains(m[1], "COMMAND"):
				perCommand = m[1]
			default:
				t.Errorf("docs/INSTALL.md lists %q, not a path", m[1])
			}
		}
	}
	_, commands, ok := strings.Cut(section, "The man pages are one per command of `baton --help`:")
	if end := strings.Index(commands, "`."); end >= 0 {
		commands = commands[:end+1] // the sentence's end
	}
	if perCommand == "" || !ok {
		t.Fatalf("docs/INSTALL.md: no baton-COMMAND.1.gz row, or no list of the commands after the table:\n%s", section)
	}
	dir := ""
	for p := range listed {
		if strings.HasSuffix(p, "/baton.1.gz") {
			dir = filepath.Dir(p)
		}
	}
	n := 0
	for _, m := range code.FindAllStringSubmatch(commands, -1) {
		name := strings.TrimPrefix(strings.TrimPrefix(m[1], "baton"), "-")
		if !regexp.MustCompile(`^[a-z]+$`).MatchString(name) {
			t.Errorf("docs/INSTALL.md's list of man pages has %q, not baton-COMMAND or -COMMAND", m[1])
		}
		listed[filepath.Join(dir, strings.Replace(perCommand, "COMMAND", name, 1))] = true
		n++
	}
	if dir == "" || n < 20 {
		t.Fatalf("docs/INSTALL.md: read %d commands and the man1 directory %q", n, dir)
	}
	return listed
}

// checkJobsPage checks the packaged baton-jobs(5): it is docs/JOBS.md
// made into a page, man finds it in section 5 of the package's man pages,
// and groff renders it without a warning.
func checkJobsPage(t *testing.T, tree, version string) {
	t.Helper()
	man := filepath.Join(tree, "usr/share/man")
	page := filepath.Join(man, "man5/baton-jobs.5.gz")
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("../../docs/JOBS.md")
	if err != nil {
		t.Fatal(err)
	}
	if want, err := jobsManPage(md, version); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the packaged baton-jobs.5 is not docs/JOBS.md's page (%v)", err)
	}
	renderMan(t, got)
	manCmd, err := exec.LookPath("man")
	if err != nil {
		t.Fatal("man is needed to check that the page is found: apt-get install man-db (./test.sh installs it as root)")
	}
	cmd := exec.Command(manCmd, "-w", "5", "baton-jobs")
	cmd.Env = append(os.Environ(), "MANPATH="+man)
	if b, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != page {
		t.Errorf("MANPATH=%s man -w 5 baton-jobs: %v %q, want %s", man, err, b, page)
	}
}

// verifyUnits runs systemd-analyze verify on the packaged units, with
// /usr/bin/baton pointing into the unpacked package (verify checks that
// ExecStart's program exists) and MANPATH at its man pages (verify checks
// Documentation=man:…). verify exits 0 even when it warns, so any output
// fails.
func verifyUnits(t *testing.T, sa, tree string) {
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"baton.service", "baton-relay.service"} {
		b, err := os.ReadFile(filepath.Join(tree, "usr/lib/systemd/system", name))
		if err != nil {
			t.Fatal(err)
		}
		unit := filepath.Join(dir, name)
		if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/bin/baton", filepath.Join(tree, "usr/bin/baton"))), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, unit)
	}
	// baton.service with its drop-in for a daemon as root, where systemd
	// reads drop-ins: beside the unit.
	b, err := os.ReadFile(filepath.Join(tree, "usr/share/baton/baton-root.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "baton.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton.service.d", "root.conf"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sa, append([]string{"verify"}, units...)...)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(tree, "usr/share/man"))
	if b, err := cmd.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, b)
	}
}

// checkCGuard checks that the baton-guard bin, of the host's architecture,
// guards with its C guard: no Go runtime starts (GODEBUG=inittrace=1 would
// list its package initialisations).
func checkCGuard(t *testing.T, bin string) {
	t.Helper()
	var protocol string
	b, _ := exec.Command(bin, "--version").CombinedOutput()
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, guard.ProtocolLine); ok {
			protocol = p
		}
	}
	if protocol == "" {
		t.Fatalf("%s --version names no guard protocol: %q", bin, b)
	}
	cmd := exec.Command(bin, guard.Command, "--protocol", protocol,
		"--ppid", strconv.Itoa(os.Getpid()), "--path", "/bin/echo", "--", "echo", "guarded")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	if b, err := cmd.CombinedOutput(); err != nil || string(b) != "guarded\n" {
		t.Errorf("the packaged baton-guard's guard of echo: %v, output %q; want only the command's (no Go package initialised)", err, b)
	}
}

// -bin builds only this machine's two binaries, as the release does: both
// static, named baton and baton-guard, the guard the one baton speaks to,
// and nothing else in the directory (bench/ measures what ships with it).
func TestReleaseBin(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("go", "run", "./tools/release", "-version", "v1.2.3", "-bin", dir)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./tools/release -bin: %v\n%s", err, b)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"baton", "baton-guard"}; !slices.Equal(names, want) {
		t.Fatalf("-bin wrote %q, want %q", names, want)
	}
	for _, name := range names {
		checkStatic(t, filepath.Join(dir, name))
	}
	if out, err := exec.Command(filepath.Join(dir, "baton"), "version").Output(); err != nil || !strings.HasPrefix(string(out), "baton v1.2.3 ") {
		t.Errorf("baton version: %q, %v; want baton v1.2.3 …", out, err)
	}
	out, _ := exec.Command(filepath.Join(dir, "baton-guard"), "--version").CombinedOutput()
	if !strings.Contains(string(out), guard.ProtocolLine+guard.Protocol) {
		t.Errorf("baton-guard --version: %q, want its protocol %s", out, guard.Protocol)
	}
}

// checkStatic fails t unless bin is linked statically: it names no program
// interpreter (dynamic loader) to find.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", bin)
		}
	}
}

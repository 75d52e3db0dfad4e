// Command release builds baton's release artefacts into dist/: static
// binaries for linux/amd64 and linux/arm64, a .deb for each, and
// SHA256SUMS over them all. Run it from the repository's root:
//
//	go run ./tools/release                 # version from git: the tag of HEAD, else a pseudo-version
//	go run ./tools/release -version v1.2.0 # name it
//	go run ./tools/release -bin DIR        # only this machine's baton and baton-guard, into DIR
//
// -bin builds the two binaries of the release for this machine, with the
// same flags, and nothing else: the scripts in bench/ measure what ships.
//
// The .deb is built by nfpm, pinned by tools/nfpm/go.mod and run with
// 'go tool nfpm', so that baton's own go.mod does not carry it. What the
// package contains and does: docs/INSTALL.md.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"text/template"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "release `VERSION` (vX.Y.Z); default: the tag of HEAD, else a pseudo-version v0.0.0-TIME-COMMIT (+dirty)")
	flag.StringVar(&o.out, "out", "dist", "write the artefacts into `DIR` (emptied first)")
	flag.StringVar(&o.arches, "arch", "amd64,arm64", "comma-separated GOARCHes to build for linux")
	flag.StringVar(&o.bin, "bin", "", "build only this machine's baton and baton-guard, as the release does, into `DIR` (no .deb, no sums)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "release: takes no arguments, got %q\n", flag.Args())
		os.Exit(64)
	}
	if err := release(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

type options struct {
	version, out, arches, bin string
}

// release runs in the repository's root.
func release(o options) error {
	if _, err := os.Stat("cmd/baton/main.go"); err != nil {
		return errors.New("run it from the root of baton's repository: go run ./tools/release")
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return fmt.Errorf("the release is named after its git commit: %w", err)
	}
	version := o.version
	if version == "" {
		if version, err = gitVersion(rev); err != nil {
			return err
		}
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$`).MatchString(version) {
		return fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH, with an optional -pre-release or +build", version)
	}
	if o.bin != "" {
		return binaries(o.bin, version, rev)
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	stage := filepath.Join(o.out, ".stage")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	var artefacts []string
	bins, guards := map[string]string{}, map[string]string{}
	for _, arch := range strings.Split(o.arches, ",") {
		bin := filepath.Join(o.out, fmt.Sprintf("baton-%s-linux-%s", version, arch))
		fmt.Printf("--- building %s\n", bin)
		if err := buildBaton(bin, "linux", arch, version, rev); err != nil {
			return err
		}
		bins[arch] = bin
		guard := filepath.Join(o.out, fmt.Sprintf("baton-guard-%s-linux-%s", version, arch))
		fmt.Printf("--- building %s\n", guard)
		if err := buildGuard(guard, arch, version, rev); err != nil {
			return err
		}
		guards[arch] = guard
		artefacts = append(artefacts, bin, guard)
	}
	// The man pages and completion scripts come from a baton that runs here.
	host := bins[runtime.GOARCH]
	if runtime.GOOS != "linux" || host == "" {
		host = filepath.Join(stage, "baton-host")
		if err := buildBaton(host, runtime.GOOS, runtime.GOARCH, version, rev); err != nil {
			return err
		}
	}
	if err := docs(host, stage, version); err != nil {
		return err
	}
	for _, arch := range strings.Split(o.arches, ",") {
		deb, err := packageDeb(o.out, stage, bins[arch], guards[arch], arch, version)
		if err != nil {
			return err
		}
		artefacts = append(artefacts, deb)
	}
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	if err := writeSums(o.out, artefacts); err != nil {
		return err
	}
	fmt.Printf("--- %s: %s and SHA256SUMS\n", o.out, strings.Join(bases(artefacts), ", "))
	return nil
}

// binaries builds this machine's baton and baton-guard into dir as the
// release builds them (-bin).
func binaries(dir, version, rev string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("-bin builds for this machine, and baton's release is for linux, not %s", runtime.GOOS)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := buildBaton(filepath.Join(dir, "baton"), "linux", runtime.GOARCH, version, rev); err != nil {
		return err
	}
	return buildGuard(filepath.Join(dir, "baton-guard"), runtime.GOARCH, version, rev)
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// gitVersion is the tag vX.Y.Z of HEAD when there is one, else a Go
// pseudo-version of the commit, as 'go build' in the checkout would stamp;
// +dirty when the tree has changes.
func gitVersion(rev string) (string, error) {
	version, err := git("describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD")
	if err != nil {
		ct, err := git("show", "-s", "--format=%ct", "HEAD")
		if err != nil {
			return "", err
		}
		var sec int64
		fmt.Sscan(ct, &sec)
		version = "v0.0.0-" + time.Unix(sec, 0).UTC().Format("20060102150405") + "-" + rev[:12]
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	if status != "" {
		version += "+dirty"
	}
	return version, nil
}

// buildBaton builds a static baton (no cgo: its SQLite is pure Go) that
// reports version and rev, which -ldflags sets because the toolchain stamps
// nothing in a git worktree or with -buildvcs=false.
func buildBaton(out, goos, goarch, version, rev string) error {
	return buildStatic(out, "./cmd/baton", goos, goarch, version, rev)
}

// buildStatic builds the command pkg (./cmd/baton or ./cmd/baton-guard,
// the small guard baton starts beside itself for each run) as buildBaton
// does.
func buildStatic(out, pkg, goos, goarch, version, rev string) error {
	return goBuild(out, pkg, goos, goarch, version, rev, false)
}

// goBuild runs go build for goos/goarch with the version and revision set:
// without cgo, or with cgo linked statically.
func goBuild(out, pkg, goos, goarch, version, rev string, cgo bool) error {
	ldflags, env := "-s -w -X main.Version="+version+" -X main.Revision="+rev, "CGO_ENABLED=0"
	if cgo {
		ldflags, env = "-linkmode external -extldflags -static "+ldflags, "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), env, "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build of %s for %s/%s: %v", pkg, goos, goarch, err)
	}
	return nil
}

// buildGuard builds baton-guard for linux/goarch. For the host's own
// architecture, where a C compiler is, it links the guard in C (package
// supervise/guard/cguard), statically: that guard starts before the Go
// runtime, at a fraction of a Go program's start-up, and a guard starts for
// every run. For another architecture, or without a C compiler, it builds
// the Go guard alone, static as baton, and says so.
func buildGuard(out, goarch, version, rev string) error {
	if runtime.GOOS == "linux" && goarch == runtime.GOARCH {
		if _, err := exec.LookPath("cc"); err == nil {
			return goBuild(out, "./cmd/baton-guard", "linux", goarch, version, rev, true)
		}
	}
	fmt.Printf("--- %s: the Go guard only (its C guard needs a C compiler for linux/%s here)\n", out, goarch)
	return buildStatic(out, "./cmd/baton-guard", "linux", goarch, version, rev)
}

// docs writes the man pages (gzipped, as Debian keeps them) and the
// completion scripts into stage: the commands' pages and the scripts from
// baton itself, baton-jobs(5) from docs/JOBS.md (manjobs.go).
func docs(baton, stage, version string) error {
	man := filepath.Join(stage, "man")
	if out, err := exec.Command(baton, "man", man).CombinedOutput(); err != nil {
		return fmt.Errorf("baton man: %v\n%s", err, out)
	}
	pages, err := filepath.Glob(filepath.Join(man, "*.1"))
	if err != nil || len(pages) == 0 {
		return fmt.Errorf("baton man wrote no pages (%v)", err)
	}
	md, err := os.ReadFile("docs/JOBS.md")
	if err != nil {
		return err
	}
	jobs, err := jobsManPage(md, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(man, "baton-jobs.5"), jobs, 0o644); err != nil {
		return err
	}
	for _, p := range append(pages, filepath.Join(man, "baton-jobs.5")) {
		if err := gzipFile(p); err != nil {
			return err
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(baton, "completion", shell).Output()
		if err != nil {
			return fmt.Errorf("baton completion %s: %v", shell, err)
		}
		if err := os.WriteFile(filepath.Join(stage, "completion."+shell), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipFile replaces p by p.gz, at maximum compression and without a name
// or time in its header, so that the same page gives the same bytes.
func gzipFile(p string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(p+".gz", b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Remove(p)
}

// nfpmConfig is the package's description for nfpm; every file that
// docs/INSTALL.md lists comes from here.
var nfpmConfig = template.Must(template.New("nfpm").Parse(`name: baton
arch: {{.Arch}}
platform: linux
version: {{.Version}}
section: admin
priority: optional
maintainer: The baton authors <https://github.com/batonhq/baton>
description: |
  Runs scheduled jobs once, and only once, on one host or across a fleet.
  PostgreSQL leases with fencing tokens, or local flock leases; a scheduler
  daemon; idempotent writes; a transactional outbox with a relay.
vendor: batonhq
homepage: https://github.com/batonhq/baton
license: Apache-2.0
# The completions install under bash-completion's directory, which bash
# reads only with that package.
recommends:
  - bash-completion
contents:
  - src: {{.Binary}}
    dst: /usr/bin/baton
    file_info: {mode: 0755}
  - src: {{.Guard}}
    dst: /usr/bin/baton-guard
    file_info: {mode: 0755}
  - src: {{.Root}}/packaging/baton.service
    dst: /usr/lib/systemd/system/baton.service
  - src: {{.Root}}/packaging/baton-relay.service
    dst: /usr/lib/systemd/system/baton-relay.service
  - src: {{.Root}}/packaging/baton-root.conf
    dst: /usr/share/baton/baton-root.conf
  - src: {{.Root}}/packaging/sysusers.conf
    dst: /usr/lib/sysusers.d/baton.conf
  - src: {{.Root}}/packaging/tmpfiles.conf
    dst: /usr/lib/tmpfiles.d/baton.conf
  - src: {{.Root}}/packaging/baton.env
    dst: /etc/baton/baton.env
    type: config|noreplace
    file_info: {mode: 0640}
  - src: {{.Root}}/packaging/jobs.yaml
    dst: /etc/baton/jobs.yaml
    type: config|noreplace
  - src: {{.Stage}}/man/*.1.gz
    dst: /usr/share/man/man1/
  - src: {{.Stage}}/man/baton-jobs.5.gz
    dst: /usr/share/man/man5/baton-jobs.5.gz
  - src: {{.Stage}}/completion.bash
    dst: /usr/share/bash-completion/completions/baton
  - src: {{.Stage}}/completion.zsh
    dst: /usr/share/zsh/vendor-completions/_baton
  - src: {{.Stage}}/completion.fish
    dst: /usr/share/fish/vendor_completions.d/baton.fish
  - src: {{.Root}}/LICENSE
    dst: /usr/share/doc/baton/copyright
  - src: {{.Root}}/docs/INSTALL.md
    dst: /usr/share/doc/baton/INSTALL.md
scripts:
  postinstall: {{.Root}}/packaging/postinst.sh
  preremove: {{.Root}}/packaging/prerm.sh
  postremove: {{.Root}}/packaging/postrm.sh
`))

// packageDeb builds dist/baton_VERSION_ARCH.deb with nfpm.
func packageDeb(out, stage, bin, guard, arch, version string) (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	var conf bytes.Buffer
	if err := nfpmConfig.Execute(&conf, map[string]string{
		"Arch": arch, "Version": version, "Binary": abs(bin), "Guard": abs(guard), "Root": root, "Stage": abs(stage),
	}); err != nil {
		return "", err
	}
	confPath := filepath.Join(abs(stage), "nfpm-"+arch+".yaml")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return "", err
	}
	deb := filepath.Join(out, fmt.Sprintf("baton_%s_%s.deb", strings.TrimPrefix(version, "v"), arch))
	fmt.Printf("--- packaging %s\n", deb)
	cmd := exec.Command("go", "tool", "nfpm", "package", "--config", confPath, "--packager", "deb", "--target", abs(deb))
	cmd.Dir = filepath.Join(root, "tools", "nfpm")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go tool nfpm (tools/nfpm/go.mod): %v", err)
	}
	return deb, nil
}

// writeSums writes SHA256SUMS in sha256sum's format: sha256sum -c checks it.
func writeSums(out string, files []string) error {
	var b strings.Builder
	slices.Sort(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(f))
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func bases(files []string) []string {
	var b []string
	for _, f := range files {
		b = append(b, filepath.Base(f))
	}
	return b
}

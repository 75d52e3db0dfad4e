package flock

// These tests are inside the package to replace what CheckDir reads of the
// host (protected_regular, the group baton, the effective uid), so they do
// not run in parallel.

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func stub[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// noGroup makes HostGroup missing, groupOf makes it the group of dir.
func noGroup(string) (*Group, error) { return nil, ErrNoAccount }

func groupOf(t *testing.T, dir string) func(string) (*Group, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return func(name string) (*Group, error) {
		return &Group{Gid: strconv.Itoa(int(st.Gid)), Name: name}, nil
	}
}

// findings returns the findings of check.
func findings(r Report, check string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// want fails unless some finding of check has level and a message
// containing every one of words.
func want(t *testing.T, r Report, check, level string, words ...string) {
	t.Helper()
	for _, f := range findings(r, check) {
		if f.Level != level {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(f.Message, w)
		}
		if all {
			return
		}
	}
	t.Errorf("no %s finding of %s mentioning %q; got:\n%s", level, check, words, dump(r))
}

// only fails unless every finding of check has level.
func only(t *testing.T, r Report, check, level string) {
	t.Helper()
	fs := findings(r, check)
	if len(fs) == 0 {
		t.Errorf("no %s finding; got:\n%s", check, dump(r))
	}
	for _, f := range fs {
		if f.Level != level {
			t.Errorf("%s: %s %q, want %s", check, f.Level, f.Message, level)
		}
	}
}

func dump(r Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("  " + f.Level + " " + f.Check + " " + f.Message + "\n")
	}
	return b.String()
}

func chmod(t *testing.T, path string, mode uint32) {
	t.Helper()
	// os.Chmod keeps the setgid and sticky bits only as os.ModeSetgid and
	// os.ModeSticky; unix.Chmod takes the octal mode as it is.
	if err := unix.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string, mode uint32) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

// A host-scope directory as tmpfiles.d would make it is healthy, and
// checking it changes nothing.
func TestDoctorHealthyHost(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o2770)
	stub(t, &lookupGroup, groupOf(t, dir))
	writeFile(t, filepath.Join(dir, "job.lock"), `{"token":3}`+"\n", 0o660)
	before := snapshot(t, dir)

	r := CheckDir(dir, ScopeHost, false)
	if r.HasErrors() {
		t.Errorf("errors on a healthy directory:\n%s", dump(r))
	}
	for _, c := range []string{"exists", "group", "owner", "mode", "access", "lock-files"} {
		only(t, r, c, LevelOK)
	}
	want(t, r, "lock-files", LevelOK, "1 lock files")
	want(t, r, "mode", LevelOK, "2770")
	if r.Dir != dir || r.Scope != ScopeHost {
		t.Errorf("report of %s %s, want %s host", r.Dir, r.Scope, dir)
	}
	if r.Tmpfiles != "d "+dir+" 2770 root baton -" {
		t.Errorf("tmpfiles line %q", r.Tmpfiles)
	}
	if r.Install != "install -d -m 2770 -g baton "+dir {
		t.Errorf("install command %q", r.Install)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("CheckDir changed the directory:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot describes dir and its entries: names, modes, sizes, mtimes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(path + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// /dev/shm is tmpfs: lock files there, and the tokens in them, are gone
// after a reboot.
func TestDoctorTmpfs(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || uint32(fs.Type) != unix.TMPFS_MAGIC {
		t.Skip("/dev/shm is not tmpfs here")
	}
	dir, err := os.MkdirTemp("/dev/shm", "baton-doctor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := CheckDir(dir, ScopeHost, false)
	want(t, r, "fs-type", LevelWarn, "tmpfs", "reboot", "token")

	// And a directory on disk is not reported as tmpfs.
	disk := CheckDir(".", ScopeHost, false)
	for _, f := range findings(disk, "fs-type") {
		if strings.Contains(f.Message, "tmpfs") {
			t.Errorf("the package directory reported as tmpfs: %s", f.Message)
		}
	}
}

func TestDoctorWorldWritable(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o777)
	r := CheckDir(dir, ScopeHost, false)
	// Any user can replace a held lock file: a failure, naming the
	// directory and the fixes.
	want(t, r, "mode", LevelError, dir, "0777", "world-writable", "without the sticky bit", "chmod +t "+dir, "chmod 2770 "+dir)
	want(t, r, "mode", LevelWarn, "setgid")
	if !r.HasErrors() {
		t.Errorf("a 0777 directory without the sticky bit has no error:\n%s", dump(r))
	}

	// The same in user scope: other users could delete the tokens.
	r = CheckDir(dir, ScopeUser, true)
	want(t, r, "mode", LevelError, dir, "world-writable", "without the sticky bit", "chmod 700 "+dir)

	// Sticky: no one deletes others' files, but anyone may create them.
	chmod(t, dir, 0o1777)
	r = CheckDir(dir, ScopeHost, false)
	for _, f := range findings(r, "mode") {
		if strings.Contains(f.Message, "without the sticky bit") {
			t.Errorf("sticky directory reported as without the sticky bit: %s", f.Message)
		}
	}
	want(t, r, "mode", LevelWarn, "1777", "world-writable")
	if r.HasErrors() {
		t.Errorf("a 1777 directory has errors:\n%s", dump(r))
	}
}

// On a read-only file system no owner or mode helps: the findings say the
// file system is read-only and point to a writable BATON_LOCK_DIR, for an
// existing directory and for a missing one. The file system is a tmpfs
// remounted read-only; where mounting is not allowed (not root), access(2)
// is made to answer EROFS instead, the narrowest point that sees it.
func TestDoctorReadOnly(t *testing.T) {
	ro := t.TempDir()
	locks := filepath.Join(ro, "locks")
	if err := os.Mkdir(locks, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, locks, 0o2770)
	stub(t, &lookupGroup, groupOf(t, locks))
	if err := unix.Mount("tmpfs", ro, "tmpfs", 0, "size=1m,mode=0755"); err == nil {
		t.Cleanup(func() {
			if err := unix.Unmount(ro, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", ro, err)
			}
		})
		if err := os.Mkdir(locks, 0o700); err != nil {
			t.Fatal(err)
		}
		chmod(t, locks, 0o2770)
		if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount %s read-only: %v", ro, err)
		}
	} else {
		t.Logf("cannot mount a tmpfs (%v): access(2) answers EROFS instead", err)
		stub(t, &access, func(string, uint32) error { return unix.EROFS })
	}

	for _, c := range []struct{ dir, check string }{{locks, "access"}, {filepath.Join(ro, "missing"), "exists"}} {
		r := CheckDir(c.dir, ScopeHost, true)
		want(t, r, c.check, LevelError, "read-only file system", "BATON_LOCK_DIR", HostDir)
		for _, f := range r.Findings {
			if f.Level == LevelError && (strings.Contains(f.Message, "usermod") || strings.Contains(f.Message, "chmod")) {
				t.Errorf("%s: advice that cannot help on a read-only file system: %s %s", c.dir, f.Check, f.Message)
			}
		}
	}
}

func TestDoctorUserScope(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o700)
	r := CheckDir(dir, ScopeUser, true)
	for _, c := range []string{"exists", "owner", "mode", "access", "lock-files"} {
		only(t, r, c, LevelOK)
	}
	if len(findings(r, "group")) != 0 {
		t.Errorf("user scope checked the group %s:\n%s", HostGroup, dump(r))
	}
	if r.Tmpfiles != "" || r.Install != "" {
		t.Errorf("user scope got a tmpfiles line %q / %q", r.Tmpfiles, r.Install)
	}
	chmod(t, dir, 0o770)
	want(t, CheckDir(dir, ScopeUser, true), "mode", LevelWarn, "0770", "chmod 700")
}

// A missing directory is an error when baton run would not create it, and
// is never created by the check.
func TestDoctorMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "locks")

	stub(t, &geteuid, func() int { return 1000 })
	r := CheckDir(dir, ScopeHost, false)
	want(t, r, "exists", LevelError, "does not exist", "install -d -m 2770 -g baton "+dir, "--scope user")
	if !r.HasErrors() {
		t.Error("HasErrors is false with an error finding")
	}
	if len(findings(r, "fs-type")) != 1 {
		t.Errorf("no fs-type of the parent:\n%s", dump(r))
	}

	// Named explicitly, baton run creates it: a warning to create it now.
	r = CheckDir(dir, ScopeHost, true)
	want(t, r, "exists", LevelWarn, "does not exist", "install -d")
	if r.HasErrors() {
		t.Errorf("errors for a directory baton run would create:\n%s", dump(r))
	}

	// As root, too.
	stub(t, &geteuid, func() int { return 0 })
	want(t, CheckDir(dir, ScopeHost, false), "exists", LevelWarn, "does not exist")

	// User scope: normal before the first run.
	want(t, CheckDir(dir, ScopeUser, true), "exists", LevelOK, "does not exist yet")

	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckDir created %s (stat: %v)", filepath.Dir(dir), err)
	}
}

func TestDoctorNotADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks")
	writeFile(t, path, "", 0o644)
	r := CheckDir(path, ScopeHost, true)
	want(t, r, "exists", LevelError, "regular file, not a directory")
	if len(r.Findings) != 1 {
		t.Errorf("checks went on past a file:\n%s", dump(r))
	}
}

// Entries named like lock files that are not regular files make baton run
// fail; a FIFO must not hang the check.
func TestDoctorNonRegularLockFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "b.lock"), 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "c.lock")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ok.lock"), `{"token":1}`, 0o660)
	writeFile(t, filepath.Join(dir, "notes.txt"), "", 0o660)
	r := CheckDir(dir, ScopeUser, true)
	want(t, r, "lock-files", LevelError, "3 of 4", "a.lock (directory)", "b.lock (FIFO)", "c.lock (symbolic link)")
	for _, f := range findings(r, "lock-files") {
		if strings.Contains(f.Message, "ok.lock") || strings.Contains(f.Message, "notes.txt") {
			t.Errorf("a good lock file or another entry reported: %s", f.Message)
		}
	}
	if !r.HasErrors() {
		t.Error("HasErrors is false")
	}
}

// In host scope, a lock file that the group cannot read and write shuts
// the other users out of its job.
func TestDoctorLockFileMode(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o2770)
	stub(t, &lookupGroup, groupOf(t, dir))
	writeFile(t, filepath.Join(dir, "private.lock"), `{"token":1}`, 0o600)
	writeFile(t, filepath.Join(dir, "readonly.lock"), `{"token":1}`, 0o640)
	writeFile(t, filepath.Join(dir, "shared.lock"), `{"token":1}`, 0o660)
	r := CheckDir(dir, ScopeHost, false)
	want(t, r, "lock-files", LevelWarn, "2 of 3", "private.lock (0600)", "readonly.lock (0640)", "chmod g+rw")
	for _, f := range findings(r, "lock-files") {
		if strings.Contains(f.Message, "shared.lock") {
			t.Errorf("a group-writable lock file reported: %s", f.Message)
		}
	}
	if r.HasErrors() {
		t.Errorf("a mode problem is an error:\n%s", dump(r))
	}
	// User scope: private lock files are what it wants.
	only(t, CheckDir(dir, ScopeUser, true), "lock-files", LevelOK)
}

func TestDoctorCorruptLockFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.lock"), "not json", 0o660)
	writeFile(t, filepath.Join(dir, "good.lock"), `{"token":7}`+"\n", 0o660)
	r := CheckDir(dir, ScopeUser, true)
	want(t, r, "lock-files", LevelError, "1 of 2", "bad.lock", "fencing token")
	for _, f := range findings(r, "lock-files") {
		if strings.Contains(f.Message, "good.lock") {
			t.Errorf("a good lock file reported: %s", f.Message)
		}
	}
}

func TestDoctorProtectedRegular(t *testing.T) {
	sysctl := filepath.Join(t.TempDir(), "protected_regular")
	stub(t, &protectedRegularPath, sysctl)
	dir := t.TempDir()
	cases := []struct {
		value string
		mode  uint32
		level string
	}{
		{"0", 0o1777, LevelOK},
		{"1", 0o1777, LevelWarn},
		{"2", 0o1777, LevelWarn},
		{"1", 0o0777, LevelOK},   // not sticky
		{"1", 0o3770, LevelOK},   // sticky but only group-writable
		{"2", 0o3770, LevelWarn}, // 2 covers group-writable too
		{"2", 0o2770, LevelOK},
	}
	for _, c := range cases {
		writeFile(t, sysctl, c.value+"\n", 0o644)
		chmod(t, dir, c.mode)
		r := CheckDir(dir, ScopeHost, false)
		fs := findings(r, "protected-regular")
		if len(fs) != 1 || fs[0].Level != c.level || !strings.Contains(fs[0].Message, "= "+c.value) {
			t.Errorf("protected_regular %s, mode %04o: %+v, want one %s finding reporting the value", c.value, c.mode, fs, c.level)
		}
		if c.level == LevelWarn && !strings.Contains(fs[0].Message, "O_CREAT") {
			t.Errorf("warning does not say what fails: %s", fs[0].Message)
		}
	}
	os.Remove(sysctl)
	only(t, CheckDir(dir, ScopeHost, false), "protected-regular", LevelOK)
}

func TestDoctorGroup(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o2770)
	stub(t, &lookupGroup, noGroup)
	r := CheckDir(dir, ScopeHost, false)
	want(t, r, "group", LevelWarn, "does not exist", "groupadd --system baton")
	only(t, r, "owner", LevelOK) // nothing to compare with

	// The group exists but the directory has another one.
	stub(t, &lookupGroup, func(name string) (*Group, error) {
		return &Group{Gid: "4242424", Name: name}, nil
	})
	r = CheckDir(dir, ScopeHost, false)
	only(t, r, "group", LevelOK)
	want(t, r, "owner", LevelWarn, "not baton", "chgrp baton")
}

func TestDoctorSetgidMissing(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o770)
	stub(t, &lookupGroup, groupOf(t, dir))
	r := CheckDir(dir, ScopeHost, false)
	want(t, r, "mode", LevelWarn, "setgid", "chmod g+s")
	chmod(t, dir, 0o2750)
	want(t, CheckDir(dir, ScopeHost, false), "mode", LevelWarn, "chmod g+rwx")
}

func TestDoctorTmpCleaner(t *testing.T) {
	// Neither path exists: CheckDir only reads, so none is made.
	for path, level := range map[string]string{
		"/var/tmp/baton-doctor-test/locks": LevelWarn,
		"/tmp/baton-doctor-test/locks":     LevelWarn,
		"/var/lib/baton-doctor-test/locks": LevelOK,
		"/tmpfoo/baton-doctor-test":        LevelOK,
	} {
		r := CheckDir(path, ScopeHost, true)
		fs := findings(r, "tmp-cleaner")
		if len(fs) != 1 || fs[0].Level != level {
			t.Errorf("%s: %+v, want one %s finding", path, fs, level)
		}
		if level == LevelWarn && !strings.Contains(fs[0].Message, "x "+path) {
			t.Errorf("%s: no tmpfiles.d exemption in %q", path, fs[0].Message)
		}
	}
}

func TestDoctorQuotesPaths(t *testing.T) {
	r := CheckDir("/srv/my locks/it's", ScopeHost, true)
	if r.Tmpfiles != `d "/srv/my locks/it's" 2770 root baton -` {
		t.Errorf("tmpfiles line %s", r.Tmpfiles)
	}
	if r.Install != `install -d -m 2770 -g baton '/srv/my locks/it'\''s'` {
		t.Errorf("install command %s", r.Install)
	}
}

func TestDoctorBadScope(t *testing.T) {
	r := CheckDir(t.TempDir(), "galaxy", true)
	want(t, r, "scope", LevelError, "galaxy")
}

// A lock directory named by a symbolic link is flagged: baton run follows
// it, but whoever may change the link moves every lock file, and baton
// setup local refuses it. The rest is checked on the target.
func TestDoctorLinkedDir(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, target, 0o2770)
	stub(t, &lookupGroup, groupOf(t, target))
	link := filepath.Join(base, "locks")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	r := CheckDir(link, ScopeHost, false)
	want(t, r, "link", LevelWarn, link+" is a symbolic link to "+target, "--lock-dir "+target)
	want(t, r, "mode", LevelOK, "2770")
	if r.Dir != link {
		t.Errorf("report of %s, want the path as named, %s", r.Dir, link)
	}

	dangling := filepath.Join(base, "gone")
	if err := os.Symlink(filepath.Join(base, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	r = CheckDir(dangling, ScopeHost, true)
	want(t, r, "link", LevelError, dangling+" is a symbolic link to "+filepath.Join(base, "nowhere")+", which does not exist")
	if len(r.Findings) != 1 {
		t.Errorf("checks went on past a dangling link:\n%s", dump(r))
	}
}

// The tmpfiles.d line and install command make the directory with the
// owner, group and mode host scope wants: they are a fix only when one of
// those checks, or the directory's existence, is not ok. A warning they
// cannot fix (t.TempDir is under /tmp, a cleaner's ground) asks for none.
func TestDoctorSetupNeeded(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o2770)
	stub(t, &lookupGroup, groupOf(t, dir))
	if r := CheckDir(dir, ScopeHost, false); r.SetupNeeded() {
		t.Errorf("SetupNeeded on a healthy directory:\n%s", dump(r))
	}
	chmod(t, dir, 0o770)
	if r := CheckDir(dir, ScopeHost, false); !r.SetupNeeded() {
		t.Errorf("SetupNeeded is false without the setgid bit:\n%s", dump(r))
	}
	chmod(t, dir, 0o2770)
	stub(t, &lookupGroup, noGroup)
	if r := CheckDir(dir, ScopeHost, false); !r.SetupNeeded() {
		t.Errorf("SetupNeeded is false without group baton:\n%s", dump(r))
	}
	stub(t, &lookupGroup, groupOf(t, dir))
	if r := CheckDir(filepath.Join(dir, "missing"), ScopeHost, false); !r.SetupNeeded() {
		t.Errorf("SetupNeeded is false for a missing directory:\n%s", dump(r))
	}
	if r := CheckDir(dir, ScopeUser, false); r.SetupNeeded() {
		t.Errorf("SetupNeeded in user scope, which has no tmpfiles.d line:\n%s", dump(r))
	}
}

package jobfile_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobfile"
)

// named is a job file with one job named name, with more settings.
func named(name string, more ...string) string {
	s := "jobs:\n  - name: " + strconv.Quote(name) + "\n    schedule: '@daily'\n    command: date\n"
	for _, l := range more {
		s += "    " + l + "\n"
	}
	return s
}

// refused parses src and returns its error, failing the test if src is
// accepted or if no line of the error starts with want.
func refused(t *testing.T, src, want string) error {
	t.Helper()
	f, err := jobfile.Parse("jobs.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded with %d jobs; want an error starting %q", len(f.Jobs), want)
	}
	checkError(t, err)
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, want) {
			return err
		}
	}
	t.Fatalf("error has no line starting %q:\n%v", want, err)
	return err
}

// '#' is reserved: job x's second slot under overlap {allow: N} is the
// lease x#2, which a job named x#2 would share.
func TestParseNameHash(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"x#2", "#", "a#", "#b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := refused(t, named(name), "jobs.yaml:2:11: jobs[0].name: ")
			if !strings.Contains(err.Error(), "'#' is reserved") {
				t.Errorf("the error does not say that '#' is reserved:\n%v", err)
			}
		})
	}
}

// Bidirectional controls make a name display as another (on the dashboard,
// in a terminal); they are refused, and never echoed raw in the error.
func TestParseNameBidi(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x061C} {
		name := "backup" + string(r) + "gpj.exe"
		t.Run(strconv.QuoteToASCII(string(r)), func(t *testing.T) {
			t.Parallel()
			err := refused(t, named(name), "jobs.yaml:2:11: jobs[0].name: ")
			if !strings.Contains(err.Error(), "bidirectional") {
				t.Errorf("the error does not say why:\n%v", err)
			}
			if strings.ContainsRune(err.Error(), r) {
				t.Errorf("the error repeats the control character raw:\n%q", err.Error())
			}
		})
	}
	// Letters of right-to-left scripts are names like any other.
	mustParse(t, "jobs.yaml", named("גיבוי-ليلي"))
}

// A job with overlap {allow: N} holds the leases NAME, NAME#2 … NAME#N;
// each must fit the stores' limit on a lease's name.
func TestParseNameSlots(t *testing.T) {
	t.Parallel()
	max := baton.MaxJobNameLen
	// The longest names that fit, which run.
	for _, tc := range []struct {
		name  string
		allow int
	}{
		{strings.Repeat("a", max), 0},
		{strings.Repeat("a", max-2), 2},
		{strings.Repeat("a", max-2), 9},
		{strings.Repeat("a", max-3), 10},
		{strings.Repeat("é", (max-2)/2), 2},
	} {
		src := named(tc.name)
		if tc.allow > 0 {
			src = named(tc.name, "overlap: {allow: "+strconv.Itoa(tc.allow)+"}")
		}
		f := mustParse(t, "jobs.yaml", src)
		if f.Jobs[0].Name != tc.name {
			t.Errorf("name %d bytes, allow %d: parsed as %q", len(tc.name), tc.allow, f.Jobs[0].Name)
		}
	}
	// One byte more, refused at the name, saying how long it may be.
	for _, tc := range []struct {
		name  string
		allow int
		want  string
	}{
		{strings.Repeat("a", max-1), 2, "at most 198 bytes"},
		{strings.Repeat("a", max), 2, "at most 198 bytes"},
		{strings.Repeat("a", max-2), 10, "at most 197 bytes"},
		{strings.Repeat("a", max-3), 100, "at most 196 bytes"},
	} {
		t.Run(strconv.Itoa(len(tc.name))+"/"+strconv.Itoa(tc.allow), func(t *testing.T) {
			t.Parallel()
			// overlap before and after the name: the order of keys does not matter
			for _, src := range []string{
				named(tc.name, "overlap: {allow: "+strconv.Itoa(tc.allow)+"}"),
				"jobs:\n  - overlap: {allow: " + strconv.Itoa(tc.allow) + "}\n    name: " + tc.name + "\n    schedule: '@daily'\n    command: date\n",
			} {
				err := refused(t, src, "jobs.yaml:")
				if !strings.Contains(err.Error(), "jobs[0].name: ") || !strings.Contains(err.Error(), tc.want) ||
					!strings.Contains(err.Error(), "#"+strconv.Itoa(tc.allow)) {
					t.Errorf("the error does not name the field, the slot lease and the limit (%s):\n%v", tc.want, err)
				}
			}
		})
	}
}

// A command the kernel would refuse (E2BIG) is refused when the file is
// read, naming the job and the field, rather than failing every run.
func TestParseCommandLimits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", jobfile.MaxArgLen+1)
	fits := strings.Repeat("x", jobfile.MaxArgLen)
	quarter := strings.Repeat("y", jobfile.MaxArgLen-100)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"shell line", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: " + long + "\n",
			"jobs.yaml:4:14: jobs[0](a).command: 131072 bytes; a command line may be at most 131071"},
		{"argument", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: [echo, " + long + "]\n",
			"jobs.yaml:4:21: jobs[0](a).command[1]: 131072 bytes; an argument may be at most 131071"},
		{"env value", job("env: {BIG: " + long + "}"), "jobs.yaml:5:16: jobs[0](a).env.BIG: BIG=VALUE is 131076 bytes; a variable may be at most 131071"},
		{"together", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: [echo, " + quarter + ", " + quarter + "]\n    env: {A: " + quarter + "}\n",
			"jobs.yaml:4:14: jobs[0](a).command: the arguments and env take 392923 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := refused(t, tc.yaml, tc.want)
			if len(err.Error()) > 2000 {
				t.Errorf("the error quotes the long value: %d bytes", len(err.Error()))
			}
		})
	}
	// At the limits, accepted.
	mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: "+fits+"\n")
	mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: [echo, "+fits+"]\n")
}

// A job file past MaxFileSize is refused before it is parsed, by Parse and
// by Load, which does not read it whole.
func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	// One job, and a comment up to one byte past the limit.
	big := job()
	big += "# " + strings.Repeat("-", jobfile.MaxFileSize-len(big)-2) + "\n"
	_, err := jobfile.Parse("jobs.yaml", []byte(big))
	if err == nil {
		t.Fatalf("Parse accepted a %d-byte file; the limit is %d", len(big), jobfile.MaxFileSize)
	}
	checkError(t, err)
	if !strings.HasPrefix(err.Error(), "jobs.yaml: ") || !strings.Contains(err.Error(), "4 MiB") {
		t.Errorf("Parse: %v; want the path and the limit", err)
	}

	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = jobfile.Load(path)
	if err == nil {
		t.Fatalf("Load accepted a %d-byte file", len(big))
	}
	checkError(t, err)
	if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), "4 MiB") {
		t.Errorf("Load: %v; want the path and the limit", err)
	}
	// A file of exactly MaxFileSize bytes is read (mostly a comment, which
	// parses quickly).
	at := job()
	at += "# " + strings.Repeat("-", jobfile.MaxFileSize-len(at)-3) + "\n"
	if len(at) != jobfile.MaxFileSize {
		t.Fatalf("built %d bytes", len(at))
	}
	if err := os.WriteFile(path, []byte(at), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := jobfile.Load(path); err != nil {
		t.Errorf("Load of %d bytes: %v", len(at), err)
	}
}

// overlap {allow: N} holds up to N leases, tried one after the other at each
// tick: N is bounded, so that a typo (allow: 1000000000) cannot make the
// daemon build a billion lease names per tick.
func TestParseOverlapAllowLimit(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs.yaml", job("overlap: {allow: 100}"))
	if f.Jobs[0].Overlap.Allow != 100 {
		t.Errorf("allow 100: parsed %+v", f.Jobs[0].Overlap)
	}
	for _, n := range []string{"101", "1000000000"} {
		refused(t, job("overlap: {allow: "+n+"}"), "jobs.yaml:5:22: jobs[0](a).overlap.allow: want at most 100 runs at once, not "+n)
	}
}

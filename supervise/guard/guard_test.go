package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

func TestExitCodesMatchBaton(t *testing.T) {
	if ExitInternal != baton.ExitInternal || ExitLeaseLost != baton.ExitLeaseLost {
		t.Fatalf("guard's exit codes %d, %d; baton's %d, %d", ExitInternal, ExitLeaseLost, baton.ExitInternal, baton.ExitLeaseLost)
	}
}

// The supervisor reads the guard's hand-written reports with encoding/json:
// each must decode to what was written, and match encoding/json's own
// encoding.
func TestReportJSON(t *testing.T) {
	for _, r := range []Report{
		{},
		{Started: 4242},
		{Done: true, ExitCode: 137},
		{Done: true, ExitCode: 76, TrustExpired: true, Error: "the lease's trust window ended"},
		{Done: true, Strays: []Process{{PID: 7, Argv: nil}, {PID: 8, Argv: []string{}}, {PID: 9, Argv: []string{"sh", "-c", `echo "a\b" 	x` + "\n\x01\x7f<&>"}}}},
		{Done: true, ExitCode: 70, Refused: true, Error: "protocol"},
		{Done: true, Error: "bad utf-8: \xff\xfe, fine: é 世 😀, \u2028"},
	} {
		got := r.AppendJSON(nil)
		var back Report
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		want, _ := json.Marshal(r)
		var viaJSON Report
		json.Unmarshal(want, &viaJSON)
		if !reflect.DeepEqual(back, viaJSON) {
			t.Errorf("AppendJSON %s decodes to %+v; encoding/json's %s to %+v", got, back, want, viaJSON)
		}
		if got[len(got)-1] != '\n' {
			t.Errorf("%q: want one line, newline-terminated", got)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want options
		ok   bool
	}{
		{[]string{"--protocol", "p1", "--strays", "kill", "--kill-after", "200ms", "--ppid", "12", "--path", "/bin/true", "--trust", "--", "true", "-x"},
			options{protocol: "p1", strays: "kill", killAfter: 200 * time.Millisecond, ppid: 12, path: "/bin/true", trust: true, argv: []string{"true", "-x"}}, true},
		{[]string{"-ppid=3", "--path=/bin/sh", "sh", "--", "-c"},
			options{strays: "wait", killAfter: 10 * time.Second, ppid: 3, path: "/bin/sh", argv: []string{"sh", "--", "-c"}}, true},
		{[]string{"--ppid", "1", "--cred", "65534:65534:65534,4,27", "--dir", "/", "--", "id"},
			options{strays: "wait", killAfter: 10 * time.Second, ppid: 1, argv: []string{"id"}, dir: "/",
				cred: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{65534, 4, 27}}}, true},
		{[]string{"--cred", "5:6:", "--", "id"},
			options{strays: "wait", killAfter: 10 * time.Second, argv: []string{"id"}, cred: &syscall.Credential{Uid: 5, Gid: 6, Groups: []uint32{}}}, true},
		{[]string{"--cred", "5:6", "--", "id"}, options{}, false},
		{[]string{"--cred", "5:6:7,", "--", "id"}, options{}, false},
		{[]string{"--cred", "5:x:7", "--", "id"}, options{}, false},
		{[]string{"--ppid", "1", "--"}, options{}, false},               // no command
		{[]string{"--ppid"}, options{}, false},                          // no value
		{[]string{"--ppid", "x", "--", "true"}, options{}, false},       // not a number
		{[]string{"--kill-after", "9", "--", "true"}, options{}, false}, // no unit
		{[]string{"--nope", "1", "--", "true"}, options{}, false},
	} {
		got, ok := parseArgs(tc.args)
		if ok != tc.ok || ok && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseArgs(%q) = %+v, %v; want %+v, %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

// The protocol follows the guard's code, so that a baton-guard of another
// build is refused rather than trusted with a run: a change to any file of
// the package but protocol.go and the tests needs a new Protocol.
func TestProtocolFollowsTheCode(t *testing.T) {
	// The guard in C (package cguard) keeps the same protocol: its code
	// is part of it too, but for protocol.h, which names the protocol.
	var files []string
	for _, pattern := range []string{"*.go", "cguard/*.go", "cguard/*.c"} {
		f, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		if f == "protocol.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	if want := hex.EncodeToString(h.Sum(nil))[:10]; Protocol != want {
		t.Fatalf("the guard's code changed: set Protocol in protocol.go and BATON_GUARD_PROTOCOL in cguard/protocol.h to %q (it is %q)", want, Protocol)
	}
}

// The C guard speaks the Go guard's protocol, by name.
func TestCGuardSpeaksTheProtocol(t *testing.T) {
	b, err := os.ReadFile("cguard/protocol.h")
	if err != nil {
		t.Fatal(err)
	}
	want := "#define BATON_GUARD_PROTOCOL \"" + Protocol + "\"\n"
	if !strings.Contains(string(b), want) {
		t.Fatalf("cguard/protocol.h does not say %q:\n%s", want, b)
	}
}

package scheduler

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

// A line is split however the pipe delivers it, a CR before its newline is
// dropped, and a long line is cut at a character's boundary, with the cut
// bytes counted.
func TestLineWriter(t *testing.T) {
	var b bytes.Buffer
	out := newRunOutput(slog.New(slog.NewJSONHandler(&b, nil)))
	w := out.stream("stdout")
	long := strings.Repeat("a", OutputLineMax-1) + "é" + "tail" // é straddles the limit
	for _, chunk := range []string{"hel", "lo\r\nsec", "ond\n", long[:100], long[100:] + "\n", "last"} {
		w.Write([]byte(chunk))
	}
	w.Close()
	out.done()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var rec struct{ Msg, Stream string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Stream != "stdout" {
			t.Errorf("line %q: stream %q", rec.Msg, rec.Stream)
		}
		got = append(got, rec.Msg)
	}
	want := []string{"hello", "second", strings.Repeat("a", OutputLineMax-1) + " …[6 bytes cut]", "last"}
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.40q… (%d bytes), want %.40q… (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
		if !utf8.ValidString(got[i]) {
			t.Errorf("line %d is not valid UTF-8", i)
		}
	}
}

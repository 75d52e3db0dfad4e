package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	nethttp "net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// notifyInput is the envelope an exec sink hands baton notify for n.
func notifyInput(t *testing.T, n scheduler.Notification) []byte {
	t.Helper()
	n.Schema, n.Kind, n.Outcome = scheduler.NotifySchema, string(baton.OutcomeFailed), baton.OutcomeFailed
	n.Tick, n.Attempt = "2026-12-02T03:00:00Z", 1
	code := 2
	n.ExitCode = &code
	b, err := json.Marshal(map[string]any{"id": 1, "topic": scheduler.NotifyTopic,
		"key": n.Job + "/" + n.Tick + "/1/failed", "payload": n})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runNotify runs the real baton notify with input on stdin, and returns
// its standard output.
func runNotify(t *testing.T, input []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(batonBin, append([]string{"notify"}, args...)...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("baton notify %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// A notification's text comes from the job: its name, output and reason
// may hold a terminal's escape sequences and NUL. baton notify text shows
// them escaped, so that printing a notification cannot drive the terminal
// that shows it; the output's tabs and line ends stay as they are meant
// (CRLF as a line end).
func TestNotifyTextShowsControlCharacters(t *testing.T) {
	t.Parallel()
	out := runNotify(t, notifyInput(t, scheduler.Notification{
		Job: "evil\x1b]0;owned\x07", Host: "db1\x00", Reason: "exit status 2\x1b[2J",
		OutputTail: "\x1b[31mred\x1b[0m\x00after nul\r\ncol1\tcol2\n\u009b6n\x7f",
	}), "text")
	for i, c := range out {
		if c < ' ' && c != '\n' && c != '\t' || c == 0x7f {
			t.Errorf("byte %d of the text is the control character %#x:\n%q", i, c, out)
		}
	}
	if bytes.Contains(out, []byte("\u009b")) {
		t.Errorf("the text holds the C1 control CSI (U+009B):\n%q", out)
	}
	text := string(out)
	for _, want := range []string{
		`[baton] evil\x1b]0;owned\a failed on db1\x00 (tick 2026-12-02T03:00:00Z)`,
		`Reason:       exit status 2\x1b[2J` + "\n",
		`\x1b[31mred\x1b[0m\x00after nul` + "\ncol1\tcol2\n" + `\u009b6n\x7f` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
}

// Slack reads <…> in a message as a mention or a link, so a job's output
// holding <!channel> would ping a whole channel. baton notify slack
// escapes &, < and > in everything that comes from the job (name, host,
// reason, output), per Slack's formatting rules, and keeps its own bold
// subject and code block.
func TestNotifySlackEscapesMentions(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []byte
	url := startHandler(t, nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
	}))
	urlFile := filepath.Join(t.TempDir(), "slack-url")
	if err := os.WriteFile(urlFile, []byte(url+"/hook\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runNotify(t, notifyInput(t, scheduler.Notification{
		Job: "ping<!channel>", Host: "db<@U123>", Reason: "a & b > c",
		OutputTail: "<!channel> disk full <@U123> <https://evil.example|click>\n",
		Link:       "https://baton.example/jobs/ping%3C%21channel%3E?a=1&b=2",
	}), "slack", "--url-file", urlFile)
	mu.Lock()
	defer mu.Unlock()
	var msg struct{ Text string }
	if err := json.Unmarshal(got, &msg); err != nil {
		t.Fatalf("Slack got %q: %v", got, err)
	}
	for _, raw := range []string{"<!channel>", "<@U123>", "<https://evil", " & ", " > "} {
		if strings.Contains(msg.Text, raw) {
			t.Errorf("the message holds %q unescaped:\n%s", raw, msg.Text)
		}
	}
	for _, want := range []string{
		"*[baton] ping&lt;!channel&gt; failed on db&lt;@U123&gt; (tick 2026-12-02T03:00:00Z)*\n```\n",
		"Reason:       a &amp; b &gt; c\n",
		"Link:         https://baton.example/jobs/ping%3C%21channel%3E?a=1&amp;b=2\n",
		"&lt;!channel&gt; disk full &lt;@U123&gt; &lt;https://evil.example|click&gt;\n```",
	} {
		if !strings.Contains(msg.Text, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg.Text)
		}
	}
}

// A job's output may hold lines of any length and CRLF line ends. The
// message baton notify mail writes keeps within RFC 5322's line limits
// (998 octets; quoted-printable keeps the body to 76, folding keeps the
// headers to 78) and has CRLF line ends only, and a mail reader that
// decodes it gets back the output with its line ends made CRLF; a long,
// non-ASCII job name reaches the Subject as RFC 2047 encoded-words.
func TestNotifyMailKeepsLineLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saved := filepath.Join(dir, "message")
	sendmail := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sendmail, []byte("#!/bin/sh\ncat > "+saved+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := "nightly-é-" + strings.Repeat("x", 180)
	long := strings.Repeat("0123456789abcdef", 128) // 2,048 bytes, one line
	output := "first line\r\nα tab\there, trailing space \r\n" + long + "\r\nbare cr\rend"
	runNotify(t, notifyInput(t, scheduler.Notification{Job: job, Host: "db1", OutputTail: output}),
		"mail", "--to", "ops@example.com", "--", sendmail)
	raw, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(raw, []byte("\r\n")) {
		t.Errorf("the message does not end with CRLF: %q", raw[max(0, len(raw)-20):])
	}
	head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	headLines := bytes.Count(head, []byte("\r\n")) + 1
	for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\r\n")), []byte("\r\n")) {
		limit := 76 // quoted-printable
		if i < headLines {
			limit = 78
		}
		if len(line) > limit {
			t.Errorf("line %d is %d octets long, over %d: %.100q…", i+1, len(line), limit, line)
		}
		if bytes.ContainsAny(line, "\r\n") {
			t.Errorf("line %d holds a bare CR or LF: %q", i+1, line)
		}
		for _, c := range line {
			if c > '~' {
				t.Errorf("line %d holds the 8-bit octet %#x: %q", i+1, c, line)
				break
			}
		}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, raw)
	}
	if cte := msg.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Errorf("Content-Transfer-Encoding %q, want quoted-printable", cte)
	}
	var dec mime.WordDecoder
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if want := "[baton] " + job + " failed on db1 (tick 2026-12-02T03:00:00Z)"; err != nil || subject != want {
		t.Errorf("Subject decodes to %q (%v), want %q", subject, err, want)
	}
	if key, err := dec.DecodeHeader(msg.Header.Get("X-Baton-Key")); err != nil || key != job+"/2026-12-02T03:00:00Z/1/failed" {
		t.Errorf("X-Baton-Key decodes to %q (%v)", key, err)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatalf("the body is not quoted-printable: %v", err)
	}
	want := "\r\nOutput (the end):\r\nfirst line\r\nα tab\there, trailing space \r\n" + long + "\r\nbare cr\r\nend\r\n"
	if !strings.HasSuffix(string(body), want) || !strings.Contains(string(body), "Job:          "+job+"\r\n") {
		t.Errorf("the body decodes to\n%q\nwant it to end with\n%q", body, want)
	}
	if bytes.Contains(raw, []byte("\r\r\n")) || bytes.Contains(body, []byte("\r\r\n")) {
		t.Errorf("CRLF in the output became CR CR LF")
	}
}

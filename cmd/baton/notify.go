package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/quotedprintable"
	nethttp "net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

const notifyHelp = `
Usage: baton notify mail --to ADDRESS [--to ADDRESS]… [flags] [-- SENDMAIL [ARG…]]
       baton notify slack --url-file FILE [flags]
       baton notify text

Turns one run notification into mail, a Slack message or plain text. It
reads the event as an exec sink writes it (the outbox envelope, JSON, on
standard input), so a relay runs it for each notification:

  notify:
    sink: "exec:baton notify mail --to ops@example.com"

  mail    writes an RFC 5322 message to the standard input of the
          command after -- (default /usr/sbin/sendmail -t -i): To, From,
          Subject, Date, a Message-ID made from the notification's key,
          Auto-Submitted: auto-generated, and a plain-text body
  slack   POSTs {"text": …} to the incoming-webhook URL in --url-file
          (a file, so the URL, which is a secret, stays out of ps and logs)
  text    prints the message to standard output

The notification's JSON schema is in docs/NOTIFY.md.

Exit status, as an exec sink reads it: 0 delivered; 65 the input is not a
notification (the event is dead at once: retrying cannot help); 75 sendmail
or Slack failed (the relay retries with backoff); 64 usage error.

Examples:
  # print a notification (docs/NOTIFY.md) as text
  baton notify text < notification.json

  # mail it to ops through /usr/sbin/sendmail
  baton notify mail --to ops@example.com < notification.json

  # post it to Slack, the webhook's URL read from a file
  baton notify slack --url-file /etc/baton/slack-webhook-url < notification.json
`

// NotifyCommand is `baton notify`.
type NotifyCommand struct {
	env      *Env
	to       multiFlag
	from     string
	sendmail []string
	urlFile  string
	timeout  time.Duration
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Run formats and sends the notification on standard input.
func (c *NotifyCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("notify", c.env.Stdout, notifyHelp)
	fs.Var(&c.to, "to", "mail: a recipient `ADDRESS` (repeatable)")
	fs.StringVar(&c.from, "from", "", "mail: the sender `ADDRESS` (default baton@HOSTNAME)")
	fs.StringVar(&c.urlFile, "url-file", "", "slack: `FILE` holding the incoming-webhook URL")
	durationFlag(fs, &c.timeout, "timeout", 10*time.Second, "bound on sending")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return baton.Invalid("WHAT", "want baton notify mail, slack or text")
	}
	what := pos[0]
	if len(pos) > 1 && what != "mail" {
		return baton.Invalid("arguments", "baton notify %s takes no arguments, got %q", what, pos[1:])
	}
	c.sendmail = pos[1:]
	if len(c.sendmail) == 0 {
		c.sendmail = []string{"/usr/sbin/sendmail", "-t", "-i"}
	}
	switch what {
	case "mail":
		if len(c.to) == 0 {
			return baton.Invalid("--to", "mail needs at least one --to ADDRESS")
		}
		for _, a := range append([]string{c.from}, c.to...) {
			if strings.ContainsAny(a, "\r\n") {
				return baton.Invalid("--to", "an address must be one line, got %q", a)
			}
		}
	case "slack":
		if c.urlFile == "" {
			return baton.Invalid("--url-file", "slack needs --url-file FILE holding the incoming-webhook URL")
		}
	case "text":
	default:
		return baton.Invalid("WHAT", "%q: want baton notify mail, slack or text", what)
	}
	in, err := io.ReadAll(io.LimitReader(c.env.Stdin, 4<<20))
	if err != nil {
		return baton.Wrap(baton.EINVALID, err, "reading the notification")
	}
	var env struct {
		Key     string                 `json:"key"`
		Payload scheduler.Notification `json:"payload"`
	}
	if err := json.Unmarshal(in, &env); err != nil || env.Payload.Schema != scheduler.NotifySchema {
		fmt.Fprintf(c.env.Stderr, "baton notify: standard input is not a run notification (an outbox envelope whose payload has schema %s)\n", scheduler.NotifySchema)
		return ExitError{Code: 65}
	}
	n := env.Payload
	subject, body := notifyText(n)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch what {
	case "text":
		fmt.Fprintf(c.env.Stdout, "%s\n\n%s", subject, body)
		return nil
	case "slack":
		return c.slack(ctx, subject, body)
	}
	return c.mail(ctx, env.Key, subject, body)
}

// notifyText is a notification's subject line and plain-text body, its
// lines ended by LF. What it says comes from the job (its name, output,
// reason), so control characters are shown escaped (visible): printing a
// notification cannot drive the terminal or the reader that shows it.
func notifyText(n scheduler.Notification) (subject, body string) {
	what := string(n.Outcome)
	if n.Kind == baton.NotifyRecovered {
		what = "recovered"
	}
	subject = fmt.Sprintf("[baton] %s %s on %s (tick %s)", visible(n.Job, ""), visible(what, ""), visible(n.Host, ""), visible(n.Tick, ""))
	var b strings.Builder
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-13s %s\n", k+":", visible(v, ""))
		}
	}
	row("Job", n.Job)
	row("Tick", n.Tick)
	row("Outcome", string(n.Outcome))
	if n.Kind == baton.NotifyRecovered {
		if n.ConsecutiveFailures == 1 {
			row("Recovered", "after 1 failure")
		} else {
			row("Recovered", fmt.Sprintf("after %d failures in a row", n.ConsecutiveFailures))
		}
	} else if n.ConsecutiveFailures > 1 {
		row("Failures", fmt.Sprintf("%d in a row", n.ConsecutiveFailures))
	}
	if n.ExitCode != nil {
		row("Exit code", fmt.Sprint(*n.ExitCode))
	}
	row("Attempt", fmt.Sprint(n.Attempt))
	row("Host", n.Host)
	row("Duration", fmt.Sprintf("%.3fs", n.DurationSeconds))
	row("Reason", n.Reason)
	row("Link", n.Link)
	if n.OutputTail != "" {
		// A line ends with LF, CRLF or a CR alone (a progress bar's).
		out := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(n.OutputTail)
		b.WriteString("\nOutput (the end):\n")
		b.WriteString(visible(out, "\n\t"))
		if !strings.HasSuffix(out, "\n") {
			b.WriteString("\n")
		}
	}
	return subject, b.String()
}

// visible shows the control characters of s (C0, DEL and C1), except those
// in keep, as Go writes them in a quoted string: \x1b, \x00, \a, \u009b.
func visible(s, keep string) string {
	hidden := func(r rune) bool { return unicode.IsControl(r) && !strings.ContainsRune(keep, r) }
	i := strings.IndexFunc(s, hidden)
	if i < 0 {
		return s
	}
	b := []byte(s[:i])
	for _, r := range s[i:] {
		if hidden(r) {
			q := strconv.QuoteRune(r)
			b = append(b, q[1:len(q)-1]...)
		} else {
			b = utf8.AppendRune(b, r)
		}
	}
	return string(b)
}

func (c *NotifyCommand) mail(ctx context.Context, key, subject, body string) error {
	from := c.from
	if from == "" {
		host, _ := os.Hostname()
		from = "baton@" + cmp.Or(host, "localhost")
	}
	sum := sha256.Sum256([]byte(key))
	var msg bytes.Buffer
	writeHeader(&msg, "To", strings.Split(strings.Join(c.to, ", "), " "))
	writeHeader(&msg, "From", []string{from})
	writeHeader(&msg, "Subject", unstructured(subject))
	fmt.Fprintf(&msg, "Date: %s\r\n", time.Now().Format(time.RFC1123Z))
	// The same notification delivered twice has one Message-ID, so mail
	// clients show it once.
	fmt.Fprintf(&msg, "Message-ID: <%s@baton>\r\n", hex.EncodeToString(sum[:16]))
	// Quoted-printable keeps the body's lines within 76 octets, whatever
	// the output's, and its ends CRLF.
	msg.WriteString("Auto-Submitted: auto-generated\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n")
	writeHeader(&msg, "X-Baton-Key", unstructured(visible(key, "")))
	msg.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&msg)
	qp.Write([]byte(body))
	qp.Close()
	cmd := exec.CommandContext(ctx, c.sendmail[0], c.sendmail[1:]...)
	cmd.Stdin = &msg
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(c.env.Stderr, "baton notify: %s: %v %s\n", strings.Join(c.sendmail, " "), err, strings.TrimSpace(stderr.String()))
		return ExitError{Code: exitTempFail}
	}
	return nil
}

func (c *NotifyCommand) slack(ctx context.Context, subject, body string) error {
	b, err := os.ReadFile(c.urlFile)
	if err != nil {
		return baton.Invalid("--url-file", "%v", err)
	}
	url := strings.TrimSpace(string(b))
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return baton.Invalid("--url-file", "%s does not hold an http:// or https:// URL", c.urlFile)
	}
	// Slack reads <…> as a mention or a link and & as an entity: the job's
	// text is escaped (an output's <!channel> would ping the channel), then
	// set in baton's bold subject and code block.
	msg, _ := json.Marshal(map[string]string{"text": "*" + slackEscape.Replace(subject) + "*\n```\n" + slackEscape.Replace(body) + "```"})
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodPost, url, bytes.NewReader(msg))
	if err != nil {
		return baton.Invalid("--url-file", "%s: %v", c.urlFile, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		// The error names the URL; the URL is the secret.
		fmt.Fprintf(c.env.Stderr, "baton notify: posting to the webhook in %s failed\n", c.urlFile)
		return ExitError{Code: exitTempFail}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != nethttp.StatusTooManyRequests:
		fmt.Fprintf(c.env.Stderr, "baton notify: the webhook in %s answered %s; retrying cannot help\n", c.urlFile, resp.Status)
		return ExitError{Code: 65}
	}
	fmt.Fprintf(c.env.Stderr, "baton notify: the webhook in %s answered %s\n", c.urlFile, resp.Status)
	return ExitError{Code: exitTempFail}
}

// slackEscape escapes the characters that Slack's message formatting
// reads as control characters.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// headerWord bounds a word of a header field that baton writes as it is,
// so that the field's name and its first word fit in a line of 78 octets;
// encoded-words are no longer either.
const headerWord = 62

// writeHeader writes the header field name with its words, separated by
// spaces, folded (RFC 5322, 2.2.3) before a word that would take the line
// past 78 octets.
func writeHeader(w *bytes.Buffer, name string, words []string) {
	w.WriteString(name + ":")
	line := len(name) + 1
	for i, word := range words {
		if i > 0 && line+1+len(word) > 78 {
			w.WriteString("\r\n")
			line = 0
		}
		w.WriteString(" " + word)
		line += 1 + len(word)
	}
	w.WriteString("\r\n")
}

// unstructured is s as the words of an unstructured header field
// (Subject): as they are when each is printable ASCII short enough to
// fold, otherwise as RFC 2047 encoded-words, which a long word or a
// non-ASCII one needs (a header is 7-bit and its lines at most 998
// octets).
func unstructured(s string) []string {
	words := strings.Split(s, " ")
	for _, w := range words {
		if len(w) > headerWord || strings.Contains(w, "=?") || strings.IndexFunc(w, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return encodedWords(s)
		}
	}
	return words
}

// encodedWords is s as RFC 2047 encoded-words of UTF-8 in the Q encoding,
// as mime.QEncoding writes them, each of whole characters and at most
// headerWord octets. Unlike mime.QEncoding.Encode, it encodes printable
// ASCII too: a word too long to fold has to be cut.
func encodedWords(s string) []string {
	const start, end = "=?utf-8?q?", "?="
	var words []string
	var w, c []byte
	for _, r := range s {
		c = c[:0]
		switch {
		case r == ' ':
			c = append(c, '_')
		case r > ' ' && r <= '~' && r != '=' && r != '?' && r != '_':
			c = append(c, byte(r))
		default:
			for _, b := range utf8.AppendRune(nil, r) {
				c = fmt.Appendf(c, "=%02X", b)
			}
		}
		if len(w) > 0 && len(start)+len(w)+len(c)+len(end) > headerWord {
			words = append(words, start+string(w)+end)
			w = w[:0]
		}
		w = append(w, c...)
	}
	if len(w) > 0 {
		words = append(words, start+string(w)+end)
	}
	return words
}

// exitTempFail (EX_TEMPFAIL) asks an exec sink's relay to retry.
const exitTempFail = 75

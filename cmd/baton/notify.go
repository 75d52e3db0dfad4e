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
	"mime"
	nethttp "net/http"
	"os"
	"os/exec"
	"strings"
	"time"

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

// notifyText is a notification's subject line and plain-text body.
func notifyText(n scheduler.Notification) (subject, body string) {
	what := string(n.Outcome)
	if n.Kind == baton.NotifyRecovered {
		what = "recovered"
	}
	subject = fmt.Sprintf("[baton] %s %s on %s (tick %s)", n.Job, what, n.Host, n.Tick)
	var b strings.Builder
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-13s %s\n", k+":", v)
		}
	}
	row("Job", n.Job)
	row("Tick", n.Tick)
	row("Outcome", string(n.Outcome))
	if n.Kind == baton.NotifyRecovered {
		row("Recovered", fmt.Sprintf("after %d failures in a row", n.ConsecutiveFailures))
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
		b.WriteString("\nOutput (the end):\n")
		b.WriteString(n.OutputTail)
		if !strings.HasSuffix(n.OutputTail, "\n") {
			b.WriteString("\n")
		}
	}
	return oneLine(subject), b.String()
}

// oneLine keeps s to one line, for a header.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

func (c *NotifyCommand) mail(ctx context.Context, key, subject, body string) error {
	from := c.from
	if from == "" {
		host, _ := os.Hostname()
		from = "baton@" + cmp.Or(host, "localhost")
	}
	sum := sha256.Sum256([]byte(key))
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "To: %s\r\n", strings.Join(c.to, ", "))
	fmt.Fprintf(&msg, "From: %s\r\n", from)
	fmt.Fprintf(&msg, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&msg, "Date: %s\r\n", time.Now().Format(time.RFC1123Z))
	// The same notification delivered twice has one Message-ID, so mail
	// clients show it once.
	fmt.Fprintf(&msg, "Message-ID: <%s@baton>\r\n", hex.EncodeToString(sum[:16]))
	msg.WriteString("Auto-Submitted: auto-generated\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n")
	fmt.Fprintf(&msg, "X-Baton-Key: %s\r\n\r\n", oneLine(key))
	msg.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
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
	msg, _ := json.Marshal(map[string]string{"text": "*" + subject + "*\n```\n" + body + "```"})
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

// exitTempFail (EX_TEMPFAIL) asks an exec sink's relay to retry.
const exitTempFail = 75

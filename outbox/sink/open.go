package sink

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// DefaultTimeout bounds one delivery when Options.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// Options configure the sinks that Open makes.
type Options struct {
	// Secret signs webhook requests (Standard Webhooks' webhook-signature,
	// and the earlier Baton-Signature); nil or empty sends none. A secret
	// "whsec_<base64>" is the key the base64 decodes to (SigningKey). The
	// other sinks do not use it.
	Secret []byte
	// Timeout bounds one delivery: a webhook's request and response, a NATS
	// connection attempt and publish ack, an exec command's run. Zero or
	// less means DefaultTimeout.
	Timeout time.Duration
	// Client sends webhook requests; nil means a client of the sink's own.
	// The sink uses a copy whose redirect policy is "never follow", so a
	// 3xx is an answer, not a hop.
	Client *http.Client
	// Webhook holds what only the webhook sink uses.
	Webhook WebhookOptions
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// accepted is what the error of a bad --sink lists.
const accepted = "want http://HOST[:PORT]/PATH or https://… (webhook), " +
	"nats://HOST[:PORT][,HOST[:PORT]…][?subject_prefix=P.&stream=NAME] (NATS JetStream), " +
	"exec:COMMAND [ARG…] (a command per event), or noop: (accepts every event)"

// Open makes the sink that spec names: the value of baton relay's --sink.
//
//	http://HOST[:PORT]/PATH, https://…     a webhook (see Webhook)
//	nats://HOST[:PORT][,…][?subject_prefix=P.&stream=NAME]   NATS JetStream (see NATS)
//	exec:COMMAND [ARG…]                    a command run per event (see Exec)
//	noop:[?fail=N]                         accepts every event (see Noop)
//
// A spec that is none of these, or malformed, is an EINVALID error naming
// --sink, with any password in it redacted. The sinks that hold resources
// (connections) implement io.Closer.
func Open(spec string, o Options) (outbox.Sink, error) {
	kind, _, ok := strings.Cut(spec, ":")
	if !ok || kind == "" {
		if strings.TrimSpace(spec) == "" {
			return nil, baton.Invalid("--sink", "is empty: %s", accepted)
		}
		return nil, baton.Invalid("--sink", "%q names no kind of sink: %s", redactSpec(spec), accepted)
	}
	switch strings.ToLower(kind) {
	case "http", "https":
		return newWebhook(spec, o)
	case "nats":
		return newNATS(spec, o)
	case "exec":
		return newExec(spec, o)
	case "noop":
		return newNoop(spec)
	}
	return nil, baton.Invalid("--sink", "%q: unknown kind of sink %q: %s", redactSpec(spec), kind, accepted)
}

// redacted stands for a secret in what is shown.
const redacted = "xxxxx"

// userinfoPattern finds the user information of URL-like specs, including
// each host of a comma-separated list ("nats://a:pw@h1,tok@h2").
var userinfoPattern = regexp.MustCompile(`([/,])[^/,@?#]*@`)

// redactSpec hides all user information (a NATS token is a lone user name,
// so the name goes too) and query values of a spec that could not be
// parsed, for error messages.
func redactSpec(spec string) string {
	s := userinfoPattern.ReplaceAllString(spec, "${1}"+redacted+"@")
	if before, query, ok := strings.Cut(s, "?"); ok {
		var parts []string
		for p := range strings.SplitSeq(query, "&") {
			if k, _, ok := strings.Cut(p, "="); ok {
				p = k + "=" + redacted
			}
			parts = append(parts, p)
		}
		s = before + "?" + strings.Join(parts, "&")
	}
	return s
}

// urlError is the cause of a url.Parse error without the URL, which may
// hold a password.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// checkPort says what is wrong with a URL's port, if anything; "" is
// allowed (the scheme's default).
func checkPort(port string) error {
	if port == "" {
		return nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return errors.New("port " + strconv.Quote(port) + " is not a number from 1 to 65535")
	}
	return nil
}

package sink

import (
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

func TestOpenRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want string // in the message
	}{
		{"", "is empty"},
		{"   ", "is empty"},
		{"kafka://broker:9092", `unknown kind of sink "kafka"`},
		{"ftp://user:hunter2@host/x", "unknown kind of sink"},
		{"/var/run/hook.sock", "names no kind of sink"},
		{"http://", "has no host"},
		{"https:///path", "has no host"},
		{"http://:8080/hook", "has no host"},
		{"http://host:99999/hook", "port \"99999\""},
		{"http://host:0/hook", "port \"0\""},
		{"http://user:hunter2@host:abc/", "invalid port"},
		{"http://host/{topic}?t={topic}", "only in the path"},
		{"nats://", "has no host"},
		{"nats://host:abc", "invalid port"},
		{"nats://host:70000", "port \"70000\""},
		{"nats://a:4222,:4223", "has no host"},
		{"nats://host:4222/stream", "has no path"},
		{"nats://host:4222?subject=x", `unknown parameter "subject"`},
		{"nats://host:4222?subject_prefix=x", "dot-terminated"},
		{"nats://host:4222?subject_prefix=a.*.", "dot-terminated"},
		{"nats://host:4222?stream=a.b", "stream \"a.b\""},
		{"nats://host:4222?stream=A&stream=B", "given 2 times"},
		{"nats:host", "want nats://"},
		{"exec:", "names no command"},
		{"exec:   ", "names no command"},
		{"exec:/nonexistent/baton-hook", "cannot run it"},
		{"exec:baton-no-such-command-in-path", "cannot run it"},
		{"noop:x", "want noop:"},
		{"noop:?fail=-1", "not a count"},
		{"noop:?fail=2&fail=3", "want noop:"},
	} {
		s, err := Open(tc.spec, Options{})
		if err == nil {
			t.Errorf("Open(%q) = %v, want an error", tc.spec, s)
			continue
		}
		if code := baton.ErrorCode(err); code != baton.EINVALID {
			t.Errorf("Open(%q): code %q, want %q (%v)", tc.spec, code, baton.EINVALID, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "--sink: ") {
			t.Errorf("Open(%q): %q does not name --sink", tc.spec, msg)
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("Open(%q): %q does not say %q", tc.spec, msg, tc.want)
		}
		if strings.Contains(msg, "hunter2") {
			t.Errorf("Open(%q): %q shows the password", tc.spec, msg)
		}
	}
}

func TestOpenUnknownKindListsAccepted(t *testing.T) {
	t.Parallel()
	_, err := Open("kafka://broker:9092", Options{})
	for _, want := range []string{"http://", "https://", "nats://", "exec:", "noop:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not list %s", err, want)
		}
	}
}

func TestOpenKindsAndStrings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec, kind, shown string
	}{
		{"http://127.0.0.1:8080/hook", "*sink.Webhook", "http://127.0.0.1:8080/hook"},
		{"HTTPS://hooks.example.com/in", "*sink.Webhook", "https://hooks.example.com/in"},
		{"https://svc:hunter2@hooks.example.com/in?token=hunter2&x=1", "*sink.Webhook", "https://svc:xxxxx@hooks.example.com/in?token=xxxxx&x=xxxxx"},
		{"http://h/events/{topic}", "*sink.Webhook", "http://h/events/{topic}"},
		{"nats://127.0.0.1:4222", "*sink.NATS", "nats://127.0.0.1:4222"},
		{"nats://hunter2@a:4222,u:hunter2@b?subject_prefix=baton.&stream=ORDERS", "*sink.NATS", "nats://xxxxx@a:4222,xxxxx@b?subject_prefix=baton.&stream=ORDERS"},
		{"exec:sh", "*sink.Exec", "exec:sh"},
		{"exec:sh -c 'hunter2'", "*sink.Exec", "exec:sh …"},
		{"noop:", "*sink.Noop", "noop:"},
		{"noop:?fail=2", "*sink.Noop", "noop:?fail=2"},
	} {
		s, err := Open(tc.spec, Options{})
		if err != nil {
			t.Errorf("Open(%q): %v", tc.spec, err)
			continue
		}
		if kind := typeName(s); kind != tc.kind {
			t.Errorf("Open(%q) is a %s, want %s", tc.spec, kind, tc.kind)
		}
		if got := s.String(); got != tc.shown {
			t.Errorf("Open(%q).String() = %q, want %q", tc.spec, got, tc.shown)
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *Webhook:
		return "*sink.Webhook"
	case *NATS:
		return "*sink.NATS"
	case *Exec:
		return "*sink.Exec"
	case *Noop:
		return "*sink.Noop"
	}
	return "unknown"
}

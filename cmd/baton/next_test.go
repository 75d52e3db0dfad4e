package main_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNext(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"berlin spring, shift", []string{"30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28T12:00:00+01:00", "-n", "2"},
			"2026-03-29T03:00:00+02:00  2026-03-29T01:00:00Z\n2026-03-30T02:30:00+02:00  2026-03-30T00:30:00Z\n"},
		{"berlin spring, skip", []string{"30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28T12:00:00+01:00", "-n", "1", "--dst-gap", "skip"},
			"2026-03-30T02:30:00+02:00  2026-03-30T00:30:00Z\n"},
		{"berlin fall, once", []string{"30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-10-24T12:00:00+02:00", "-n", "2"},
			"2026-10-25T02:30:00+02:00  2026-10-25T00:30:00Z\n2026-10-26T02:30:00+01:00  2026-10-26T01:30:00Z\n"},
		{"berlin fall, both", []string{"--dst-repeat", "both", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-10-24T12:00:00+02:00", "-n", "2"},
			"2026-10-25T02:30:00+02:00  2026-10-25T00:30:00Z\n2026-10-25T02:30:00+01:00  2026-10-25T01:30:00Z\n"},
		// A wildcard schedule runs every 20 minutes of real time through the
		// repeated hour (00:00Z-02:00Z), whatever --dst-repeat says.
		{"berlin fall, every 20 min", []string{"*/20 * * * *", "--tz", "Europe/Berlin", "--from", "2026-10-25T00:30:00Z", "-n", "4", "--dst-repeat", "once"},
			"2026-10-25T02:40:00+02:00  2026-10-25T00:40:00Z\n2026-10-25T02:00:00+01:00  2026-10-25T01:00:00Z\n" +
				"2026-10-25T02:20:00+01:00  2026-10-25T01:20:00Z\n2026-10-25T02:40:00+01:00  2026-10-25T01:40:00Z\n"},
		{"new york fall, every 20 min", []string{"*/20 * * * *", "--tz", "America/New_York", "--from", "2026-11-01T05:30:00Z", "-n", "3"},
			"2026-11-01T01:40:00-04:00  2026-11-01T05:40:00Z\n2026-11-01T01:00:00-05:00  2026-11-01T06:00:00Z\n2026-11-01T01:20:00-05:00  2026-11-01T06:20:00Z\n"},
		// … and not for wall times in a gap: 02:10 does not exist, and 03:00
		// does not match.
		{"berlin spring, hourly at :10", []string{"10 * * * *", "--tz", "Europe/Berlin", "--from", "2026-03-29T00:00:00Z", "-n", "2"},
			"2026-03-29T01:10:00+01:00  2026-03-29T00:10:00Z\n2026-03-29T03:10:00+02:00  2026-03-29T01:10:00Z\n"},
		{"utc, default count", []string{"@daily", "--tz", "UTC", "--from", "2026-01-01T00:00:00Z"},
			"2026-01-02T00:00:00Z  2026-01-02T00:00:00Z\n2026-01-03T00:00:00Z  2026-01-03T00:00:00Z\n2026-01-04T00:00:00Z  2026-01-04T00:00:00Z\n" +
				"2026-01-05T00:00:00Z  2026-01-05T00:00:00Z\n2026-01-06T00:00:00Z  2026-01-06T00:00:00Z\n"},
	}
	for _, tt := range tests {
		r := s.run(t, append([]string{"next"}, tt.args...)...)
		if r.code != 0 || r.stdout != tt.want {
			t.Errorf("%s: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", tt.name, r.code, r.stdout, tt.want, r.stderr)
		}
	}
}

func TestNextJSON(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	r := s.run(t, "next", "0,15,30,45 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-29T00:00:00+01:00", "-n", "2", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var fires []struct{ Local, UTC string }
	if err := json.Unmarshal([]byte(r.stdout), &fires); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	// 02:00, 02:15, 02:30 and 02:45 do not exist on the day: one fire at
	// 03:00, then the next day's 02:00.
	want := []struct{ Local, UTC string }{
		{"2026-03-29T03:00:00+02:00", "2026-03-29T01:00:00Z"},
		{"2026-03-30T02:00:00+02:00", "2026-03-30T00:00:00Z"},
	}
	if len(fires) != len(want) || fires[0] != want[0] || fires[1] != want[1] {
		t.Fatalf("got %+v, want %+v", fires, want)
	}
}

func TestNextHelp(t *testing.T) {
	t.Parallel()
	r := localStore(t).run(t, "next", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--dst-gap shift") || !strings.Contains(r.stdout, "--dst-repeat both") {
		t.Fatalf("exit %d, help does not explain the DST policies:\n%s", r.code, r.stdout)
	}
}

func TestNextBadInput(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	tests := []struct {
		args  []string
		field string
	}{
		{[]string{"0 0 30 2 *"}, "day-of-month"},
		{[]string{"0 0 31 4 *"}, "day-of-month"},
		{[]string{"61 * * * *"}, "minute"},
		{[]string{"* * * * FUN"}, "day-of-week"},
		{[]string{"@every 10ms"}, "schedule"},
		{[]string{}, "schedule"},
		{[]string{"0", "0", "*", "*", "*"}, "schedule"},
		{[]string{"@daily", "--tz", "Mars/Base"}, "--tz"},
		{[]string{"@daily", "-n", "0"}, "-n"},
		{[]string{"@daily", "--from", "yesterday"}, "--from"},
		{[]string{"@daily", "--dst-gap", "jump"}, "--dst-gap"},
		{[]string{"@daily", "--dst-repeat", "twice"}, "--dst-repeat"},
	}
	for _, tt := range tests {
		r := s.run(t, append([]string{"next"}, tt.args...)...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 64 || !strings.HasPrefix(first, "baton next: "+tt.field+": ") || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 64 and an error naming %s", tt.args, r.code, r.stdout, r.stderr, tt.field)
		}
	}
}

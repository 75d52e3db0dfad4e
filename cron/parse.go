package cron

import (
	"strings"
	"time"

	"github.com/batonhq/baton"
)

// Schedule is a parsed cron schedule. It is immutable and safe for
// concurrent use.
type Schedule struct {
	spec string

	// Bit v of a set means the value v matches.
	second, minute, hour, dom, month, dow uint64

	// domStar and dowStar record whether the field was written starting with
	// '*'. As in Vixie cron, a day matches when both day fields match if
	// either starts with '*', and when either matches otherwise.
	domStar, dowStar bool

	// wildcard records whether the minute or the hour field was written
	// starting with '*' (Vixie cron's MIN_STAR and HR_STAR).
	wildcard bool

	// every is the interval of an @every schedule, zero for the others.
	every time.Duration

	// reboot marks @reboot, which has no instants (Reboot).
	reboot bool
}

// String returns the schedule as it was written.
func (s *Schedule) String() string { return s.spec }

// Wildcard reports whether s is a wildcard schedule, which runs by real time
// through DST changes rather than by its DST policy: one whose minute or
// hour field is written starting with '*' (`*/20 * * * *`, `0 * * * *`,
// `*/15 2 * * *`, `*/5 * * * * *`, @hourly). This is Vixie cron's rule
// (entry.c's MIN_STAR and HR_STAR, which cronie keeps): it reads how a field
// is written, so a range such as `0 1-3 * * *`, even `0-59 0-23 * * *`, is a
// fixed-time schedule, and the seconds and day fields do not count. @every
// schedules are not wall-clock schedules and are never wildcard ones.
func (s *Schedule) Wildcard() bool { return s.wildcard }

// Reboot reports whether s is @reboot: it fires when a daemon starts, an
// event no clock can tell, so Next never returns an instant for it.
func (s *Schedule) Reboot() bool { return s.reboot }

// field describes one field of a cron line.
type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	secondField = field{name: "second", min: 0, max: 59}
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	// 7 is Sunday as well as 0, as in most crons; it is folded into 0.
	dowField = field{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

// macros are the @ shorthands, as six-field lines.
var macros = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// daysIn is the most days each month can have; February's 29 is what makes
// `0 0 29 2 *` possible and `0 0 30 2 *` not.
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

const fieldsHint = "want 5 fields (minute hour day-of-month month day-of-week), 6 with a leading second, or a macro such as @daily, @every 1h or @reboot"

// Parse parses a cron schedule: 5 fields (minute hour day-of-month month
// day-of-week), 6 with a leading second field, one of the macros @yearly,
// @annually, @monthly, @weekly, @daily, @midnight and @hourly,
// `@every DURATION` (a Go duration of at least 1s), or @reboot (see
// Schedule.Reboot).
//
// A field is a list (a,b,c) of values, ranges (a-b), `*`, and any of those
// but a single value with a step (*/n, a-b/n; a/n means a-max/n). Months and
// days of the week may be named (JAN–DEC, SUN–SAT, in any case); 7 is
// Sunday. A schedule that can never fire, such as `0 0 30 2 *`, is refused.
//
// Errors are *baton.Error with code EINVALID and Field naming the field at
// fault: second, minute, hour, day-of-month, month, day-of-week, or schedule
// for the line as a whole.
func Parse(spec string) (*Schedule, error) {
	line := strings.TrimSpace(spec)
	if line == "" {
		return nil, baton.Invalid("schedule", "empty schedule; %s", fieldsHint)
	}
	if err := checkZonePrefix(spec, line); err != nil {
		return nil, err
	}
	if strings.HasPrefix(line, "@") {
		return parseMacro(spec, line)
	}
	fields := strings.Fields(line)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, baton.Invalid("schedule", "%q has %d fields; %s", spec, len(fields), fieldsHint)
	}
	s := &Schedule{spec: spec}
	var err error
	if s.second, _, err = parseField(fields[0], secondField); err != nil {
		return nil, err
	}
	var minuteStar, hourStar bool
	if s.minute, minuteStar, err = parseField(fields[1], minuteField); err != nil {
		return nil, err
	}
	if s.hour, hourStar, err = parseField(fields[2], hourField); err != nil {
		return nil, err
	}
	s.wildcard = minuteStar || hourStar
	if s.dom, s.domStar, err = parseField(fields[3], domField); err != nil {
		return nil, err
	}
	if s.month, _, err = parseField(fields[4], monthField); err != nil {
		return nil, err
	}
	if s.dow, s.dowStar, err = parseField(fields[5], dowField); err != nil {
		return nil, err
	}
	if s.dow&(1<<7) != 0 {
		s.dow = s.dow&^(1<<7) | 1
	}
	if err := s.checkPossible(fields[3], fields[4]); err != nil {
		return nil, err
	}
	return s, nil
}

// checkPossible refuses a schedule whose days of the month exist in none of
// its months. Only the day of the month can make that happen: when both day
// fields are restricted a day matches on either (and every weekday happens
// in every month), and a day-of-month field starting with '*' includes 1.
// A restricted day of the week under the AND rule (`0 0 29 2 */7`) can make a
// schedule rare (every 28 years) but not impossible, so it is accepted.
func (s *Schedule) checkPossible(domExpr, monthExpr string) error {
	if !s.domStar && !s.dowStar {
		return nil
	}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		for d := 1; d <= daysIn[m]; d++ {
			if s.dom&(1<<d) != 0 {
				return nil
			}
		}
	}
	return baton.Invalid("day-of-month", "schedule never fires: day %q does not exist in month %q", domExpr, monthExpr)
}

// checkZonePrefix refuses a line pasted from a crontab that begins with a
// time zone (cronie's CRON_TZ=, or TZ=), saying where the zone goes: a
// job's zone is its timezone: key, so that the schedule is cron alone.
func checkZonePrefix(spec, line string) error {
	fields := strings.Fields(line)
	name, zone, ok := strings.Cut(fields[0], "=")
	if !ok || !strings.EqualFold(name, "CRON_TZ") && !strings.EqualFold(name, "TZ") {
		return nil
	}
	const where = "a schedule holds no time zone: put it in the job's timezone: key"
	if len(fields) == 1 {
		return baton.Invalid("schedule", "%q: %s (timezone: %s)", spec, where, zone)
	}
	return baton.Invalid("schedule", "%q: %s (timezone: %s) and write the schedule as %q", spec, where, zone, strings.Join(fields[1:], " "))
}

func parseMacro(spec, line string) (*Schedule, error) {
	fields := strings.Fields(line)
	name := strings.ToLower(fields[0])
	if name == "@every" {
		if len(fields) != 2 {
			return nil, baton.Invalid("schedule", "%q: want @every DURATION, such as @every 90s or @every 1h30m", spec)
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return nil, baton.Invalid("schedule", "%q: %q is not a duration such as 90s or 1h30m", spec, fields[1])
		}
		if d < time.Second {
			return nil, baton.Invalid("schedule", "%q: the interval %q is under 1s", spec, fields[1])
		}
		return &Schedule{spec: spec, every: d}, nil
	}
	if name == "@reboot" {
		if len(fields) != 1 {
			return nil, baton.Invalid("schedule", "%q: @reboot takes nothing after it", spec)
		}
		return &Schedule{spec: spec, reboot: true}, nil
	}
	six, ok := macros[name]
	if !ok || len(fields) != 1 {
		return nil, baton.Invalid("schedule", "%q is not a macro; want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every DURATION or @reboot", spec)
	}
	s, err := Parse(six)
	if err != nil {
		return nil, err
	}
	s.spec = spec
	return s, nil
}

// parseField returns the set of values of expr and whether expr starts with
// '*'.
func parseField(expr string, f field) (uint64, bool, error) {
	var set uint64
	for _, item := range strings.Split(expr, ",") {
		if item == "" {
			return 0, false, baton.Invalid(f.name, "empty item in %q", expr)
		}
		rangePart, stepPart, hasStep := strings.Cut(item, "/")
		var lo, hi int
		var err error
		if rangePart == "*" {
			lo, hi = f.min, f.max
		} else if a, b, isRange := strings.Cut(rangePart, "-"); isRange {
			switch {
			case a == "":
				return 0, false, baton.Invalid(f.name, "%q: a range needs a start (START-END)", rangePart)
			case b == "":
				return 0, false, baton.Invalid(f.name, "%q: a range needs an end (START-END)", rangePart)
			case strings.Contains(b, "-"):
				return 0, false, baton.Invalid(f.name, "%q: a range has one '-' (START-END); values are never negative", rangePart)
			}
			if lo, err = value(a, f); err != nil {
				return 0, false, err
			}
			if hi, err = value(b, f); err != nil {
				return 0, false, err
			}
			if lo > hi {
				return 0, false, baton.Invalid(f.name, "range %q runs backwards", item)
			}
		} else {
			if lo, err = value(rangePart, f); err != nil {
				return 0, false, err
			}
			hi = lo
			if hasStep {
				hi = f.max
			}
		}
		step := 1
		if hasStep {
			n, ok := number(stepPart)
			if !ok || n < 1 {
				return 0, false, baton.Invalid(f.name, "step %q in %q is not a positive number", stepPart, item)
			}
			step = n
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, strings.HasPrefix(expr, "*"), nil
}

// value parses one value of field f: a number in range or one of its names.
func value(tok string, f field) (int, error) {
	if v, ok := f.names[strings.ToLower(tok)]; ok {
		return v, nil
	}
	v, ok := number(tok)
	if !ok {
		if f.names != nil {
			return 0, baton.Invalid(f.name, "%q is not a number or a name", tok)
		}
		return 0, baton.Invalid(f.name, "%q is not a number", tok)
	}
	if v < f.min || v > f.max {
		return 0, baton.Invalid(f.name, "%q is out of range %d-%d", tok, f.min, f.max)
	}
	return v, nil
}

// number parses a small unsigned decimal number: digits only, no sign, so
// that "+5" and "0x1" are refused rather than read the way strconv would.
func number(tok string) (int, bool) {
	if tok == "" || len(tok) > 4 {
		return 0, false
	}
	n := 0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

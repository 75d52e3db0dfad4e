package crontab

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Cron's defaults for what a crontab does not set (cronie's entry.c and
// pathnames.h). Vixie cron's PATH, /usr/bin:/bin, is the start of
// cronie's, so a command either found is found where it found it.
const (
	DefaultShell = "/bin/sh"
	DefaultPath  = "/usr/bin:/bin:/usr/sbin:/sbin"
)

// Source is one crontab to import.
type Source struct {
	Name string // the file's name, in messages
	Tab  *Crontab
	// User owns a user crontab: its entries run as User. A system
	// crontab's entries each name their own (Entry.User).
	User string
}

// Account is what cron takes from a user's passwd entry.
type Account struct {
	Name, Home string
}

// Options say what the host tells and what the caller chose.
type Options struct {
	// Zone is the zone of the entries without CRON_TZ: the host's, which
	// cron reads them in.
	Zone string
	// Scope is the scope of every job: "" (once per fleet, baton's default)
	// or "host" (once per host).
	Scope string
	// Lookup finds a user of this host; its error says why it cannot
	// ("does not exist on this host").
	Lookup func(name string) (Account, error)
	// LoadZone checks a CRON_TZ value (time.LoadLocation by default).
	LoadZone func(name string) error
}

// Warning is a line whose meaning changes in baton. Line is 0 for what
// concerns the whole file.
type Warning struct {
	File    string
	Line    int
	Message string
}

func (w Warning) String() string {
	if w.Line == 0 {
		return w.File + ": " + w.Message
	}
	return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message)
}

// failureKinds are what cronie's -n mails: the output of a run that
// failed.
var failureKinds = []string{"failed", "timed-out", "lost-lease", "unknown", "fenced"}

// job is one entry's settings, as the job file will say them.
type job struct {
	comments []string // the crontab's, then the warnings
	name     string
	schedule string
	command  string
	stdin    *string
	settings map[string]string // user, timezone, dir, shell, jitter, notify ("false", "output", "failures")
	env      []Var
}

// settingKeys are the settings a job may share with the others through
// defaults:, in the order the file writes them.
var settingKeys = []string{"user", "timezone", "dir", "shell", "jitter", "notify"}

// converter turns the entries of crontabs into jobs, one at a time.
type converter struct {
	o         Options
	jobs      []job
	warns     []Warning
	names     map[string]int // a name given → how many jobs have it
	mailTo    []string       // every address a line mails to
	mailFrom  string
	firstMail []string // the addresses of the first line that mails
	mixedMail bool     // whether another line mails to others

	// Of the source being converted:
	src      Source
	problems *Error
	reported map[int]bool // the lines with a problem already reported
	noMail   int          // its jobs without MAILTO
}

// JobFile returns the job file that runs the entries of srcs as cron runs
// them, in their order, with the warnings for the lines whose meaning
// changes. The error, if any, is an *Error for one of the sources.
func JobFile(srcs []Source, o Options) ([]byte, []Warning, error) {
	if o.LoadZone == nil {
		o.LoadZone = func(name string) error { _, err := time.LoadLocation(name); return err }
	}
	c := &converter{o: o, names: map[string]int{}}
	var trailing []string
	for _, src := range srcs {
		c.src, c.problems, c.reported, c.noMail = src, &Error{File: src.Name}, map[int]bool{}, 0
		for _, ent := range src.Tab.Entries {
			c.entry(ent)
		}
		if len(c.problems.Problems) > 0 {
			slices.SortStableFunc(c.problems.Problems, func(a, b Problem) int { return a.Line - b.Line })
			return nil, nil, c.problems
		}
		if src.Tab.MissingNewline && len(src.Tab.Entries) > 0 {
			c.warn(&c.jobs[len(c.jobs)-1], src.Tab.Entries[len(src.Tab.Entries)-1].Line,
				"the last line has no newline: crond ignores such a line (and crontab(1) refuses the file); baton runs it")
		}
		if c.noMail > 0 {
			c.warn(nil, 0, "no MAILTO for %d of its jobs: cron mailed their output to their user on this host; "+
				"baton keeps it with each run instead (baton logs JOB). Set MAILTO before importing to have it mailed", c.noMail)
		}
		trailing = append(trailing, src.Tab.Trailing...)
	}
	if c.mixedMail {
		c.warn(nil, 0, "MAILTO names different addresses on different lines; a job file has one sink, so %s each get the mail of every job that mails",
			strings.Join(c.mailTo, ", "))
	}
	var notes []string
	for _, w := range c.warns {
		if w.Line == 0 {
			notes = append(notes, w.String())
		}
	}
	return render(srcs, c.jobs, trailing, c.mailTo, c.mailFrom, notes, o), c.warns, nil
}

// warn records a warning about line of the source (0: the whole file),
// and writes it as a comment above j, when there is one.
func (c *converter) warn(j *job, line int, format string, args ...any) {
	w := Warning{c.src.Name, line, fmt.Sprintf(format, args...)}
	c.warns = append(c.warns, w)
	if j != nil {
		j.comments = append(j.comments, "# baton: "+w.Message)
	}
}

// problem records a line that cannot be imported, once.
func (c *converter) problem(line int, format string, args ...any) {
	if !c.reported[line] {
		c.reported[line] = true
		c.problems.Problems = append(c.problems.Problems, Problem{line, fmt.Sprintf(format, args...)})
	}
}

// entry converts one entry of the source into a job.
func (c *converter) entry(ent Entry) {
	user := cmp.Or(c.src.User, ent.User)
	acct, err := c.o.Lookup(user)
	if err != nil {
		what := "the crontab's owner"
		if ent.User != "" {
			what = "the line's user"
		}
		c.problem(ent.Line, "%s %q: %v", what, user, err)
		return
	}
	j := job{comments: slices.Clone(ent.Comments), schedule: ent.Schedule, command: ent.Command,
		settings: map[string]string{"user": acct.Name, "timezone": c.o.Zone, "shell": DefaultShell, "dir": acct.Home}}
	if ent.HasStdin && ent.Stdin != "" {
		j.stdin = &ent.Stdin
	}
	mail, mailSet := c.environment(&j, ent.Env)
	switch {
	case mailSet && len(mail) == 0:
		j.settings["notify"] = "false"
	case !mailSet:
		c.noMail++
		j.settings["notify"] = "false"
	case ent.MailOnError:
		j.settings["notify"] = "failures"
	default:
		j.settings["notify"] = "output"
	}
	if len(mail) > 0 {
		if c.firstMail == nil {
			c.firstMail = mail
		} else if !slices.Equal(c.firstMail, mail) {
			c.mixedMail = true
		}
	}
	for _, a := range mail {
		if !slices.Contains(c.mailTo, a) {
			c.mailTo = append(c.mailTo, a)
		}
	}
	if d := j.settings["jitter"]; d != "" {
		c.warn(&j, ent.Line, "RANDOM_DELAY=%s is jitter: %s: baton delays each tick by its own amount, the same on every daemon, where cronie drew one delay per start of crond",
			strings.TrimSuffix(d, "m"), d)
	}
	if ent.NoLog {
		c.warn(&j, ent.Line, "the leading - (no syslog line per run) has no equivalent: baton records every run")
	}
	if ent.Schedule == "@reboot" {
		c.warn(&j, ent.Line, "@reboot runs once each time a daemon starts on a host, which is also after baton is restarted or upgraded, not only at boot")
	}
	if isFlockWrapped(ent.Command) {
		j.comments = append(j.comments, "# baton: the job's lease already keeps runs from overlapping (overlap: skip); flock -n is kept, for other programs that take the same lock")
	}
	j.name = jobName(user, ent)
	if n := c.names[j.name]; n > 0 {
		c.names[j.name] = n + 1
		j.name += "-" + strconv.Itoa(n+1)
	} else {
		c.names[j.name] = 1
	}
	c.jobs = append(c.jobs, j)
}

// environment applies the environment lines of an entry to j, as cron's
// defaults and overrides say, and returns the addresses its MAILTO
// names, and whether it has one.
func (c *converter) environment(j *job, vars []Var) (mail []string, mailSet bool) {
	// user: gives HOME, LOGNAME and USER, as cron sets them.
	env := []Var{{Name: "SHELL", Value: DefaultShell}, {Name: "PATH", Value: DefaultPath}}
	set := func(name, value string) {
		if i := slices.IndexFunc(env, func(v Var) bool { return v.Name == name }); i >= 0 {
			env[i].Value = value
		} else {
			env = append(env, Var{Name: name, Value: value})
		}
	}
	for _, v := range vars {
		switch v.Name {
		case "SHELL":
			if v.Value == "" {
				c.problem(v.Line, "SHELL is empty; cron could not run a command with it")
				continue
			}
			j.settings["shell"] = v.Value
			set("SHELL", v.Value)
		case "HOME":
			if !strings.HasPrefix(v.Value, "/") {
				c.problem(v.Line, "HOME=%s: cron runs the command in HOME; want an absolute path", v.Value)
				continue
			}
			j.settings["dir"] = v.Value
			set("HOME", v.Value)
		case "LOGNAME", "USER":
			// cron sets both to the user's name whatever the crontab says.
		case "CRON_TZ":
			if v.Value == "" {
				continue // cron reads an empty CRON_TZ as none
			}
			if err := c.o.LoadZone(v.Value); err != nil || v.Value == "Local" {
				c.problem(v.Line, "CRON_TZ=%s is not a time zone this host knows; want an IANA zone such as Europe/Berlin", v.Value)
				continue
			}
			j.settings["timezone"] = v.Value
		case "MAILTO":
			mailSet, mail = true, nil
			for _, a := range strings.Split(v.Value, ",") {
				switch a = strings.TrimSpace(a); {
				case a == "":
				case strings.ContainsAny(a, " \t") || strings.HasPrefix(a, "-"):
					c.problem(v.Line, "MAILTO=%s: %q is not an address baton notify mail can take (white space, or a leading -); "+
						"list addresses separated by commas (a # after the value is part of it in cron)", v.Value, a)
				default:
					mail = append(mail, a)
				}
			}
		case "MAILFROM":
			c.mailFrom = v.Value
		case "RANDOM_DELAY":
			n, err := strconv.Atoi(v.Value)
			if err != nil || n < 0 || n > 24*60 {
				c.problem(v.Line, "RANDOM_DELAY=%s: want minutes from 0 to 1440", v.Value)
				continue
			}
			if n > 0 {
				j.settings["jitter"] = strconv.Itoa(n) + "m"
			}
		default:
			set(v.Name, v.Value)
		}
	}
	j.env = env
	return mail, mailSet
}

// isFlockWrapped reports whether command runs under flock -n, the usual
// guard against overlapping runs in a crontab.
func isFlockWrapped(command string) bool {
	f := strings.Fields(command)
	return len(f) > 1 && path.Base(f[0]) == "flock" && slices.ContainsFunc(f[1:], func(a string) bool {
		return a == "-n" || a == "--nonblock" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "n")
	})
}

// jobName is a readable slug of the command and a short hash of the user,
// schedule and command as written: the same on every host that imports
// the same line.
func jobName(user string, e Entry) string {
	sum := sha256.Sum256([]byte(user + "\x00" + e.Schedule + "\x00" + e.Raw))
	return slug(e.Command) + "-" + hex.EncodeToString(sum[:4])
}

// noise are words that say little of what a command does.
var noise = map[string]bool{"cd": true, "test": true, "nice": true, "ionice": true, "nohup": true, "flock": true,
	"exec": true, "sudo": true, "env": true, "dev": true, "null": true, "true": true, "then": true, "if": true, "fi": true}

// slug is up to three words of command, lower case, letters and digits.
func slug(command string) string {
	var words []string
	size := 0
	fields := strings.Fields(command)
	if len(fields) > 0 && path.Base(fields[0]) == "flock" {
		// flock [OPTION…] LOCKFILE COMMAND: the lock's name is noise.
		i := 1
		for i < len(fields) && strings.HasPrefix(fields[i], "-") {
			i++
		}
		fields = fields[min(i+1, len(fields)):]
	}
	for _, w := range fields {
		if strings.ContainsAny(w, "<>=|&;()+%") || strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") || strings.HasPrefix(w, "$") {
			continue
		}
		w = path.Base(strings.Trim(w, `'"`))
		var b strings.Builder
		dash := false
		for _, r := range strings.ToLower(w) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
				dash = false
			} else if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
		s := strings.Trim(b.String(), "-")
		if s == "" || noise[s] || len(s) > 30 {
			continue
		}
		words = append(words, s)
		if size += len(s); len(words) == 3 || size >= 30 {
			break
		}
	}
	if len(words) == 0 {
		return "job"
	}
	return strings.Join(words, "-")
}

// render writes the job file: the settings every job shares in
// defaults:, each job's others beside it.
func render(srcs []Source, jobs []job, trailing, mailTo []string, mailFrom string, notes []string, o Options) []byte {
	shared := map[string]string{}
	var sharedEnv []Var
	if len(jobs) > 1 {
		for _, k := range settingKeys {
			v := jobs[0].settings[k]
			if !slices.ContainsFunc(jobs, func(j job) bool { return j.settings[k] != v }) {
				shared[k] = v
			}
		}
		for _, v := range jobs[0].env {
			if !slices.ContainsFunc(jobs, func(j job) bool { val, ok := Lookup(j.env, v.Name); return !ok || val != v.Value }) {
				sharedEnv = append(sharedEnv, v)
			}
		}
	}
	if len(mailTo) == 0 {
		// Nothing is mailed: no notify at all.
		delete(shared, "notify")
		for i := range jobs {
			delete(jobs[i].settings, "notify")
		}
	}
	if o.Scope != "" {
		shared["scope"] = o.Scope
	}
	root := mapping()
	if len(mailTo) > 0 {
		sink := "exec:baton notify mail"
		for _, a := range mailTo {
			sink += " --to " + a
		}
		if mailFrom != "" && !strings.ContainsAny(mailFrom, " \t") {
			sink += " --from " + mailFrom
		}
		root.Content = append(root.Content, str("notify"), mapping(str("sink"), str(sink)))
	}
	if len(shared) > 0 || len(sharedEnv) > 0 {
		d := mapping()
		if s, ok := shared["scope"]; ok {
			d.Content = append(d.Content, str("scope"), str(s))
		}
		settings(d, shared, sharedEnv)
		root.Content = append(root.Content, str("defaults"), d)
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, j := range jobs {
		n := mapping(str("name"), str(j.name), str("schedule"), str(j.schedule), str("command"), str(j.command))
		if j.stdin != nil {
			n.Content = append(n.Content, str("stdin"), str(*j.stdin))
		}
		own := map[string]string{}
		for k, v := range j.settings {
			if sv, ok := shared[k]; !ok || sv != v {
				own[k] = v
			}
		}
		var env []Var
		for _, v := range j.env {
			if !slices.ContainsFunc(sharedEnv, func(s Var) bool { return s.Name == v.Name }) {
				env = append(env, v)
			}
		}
		settings(n, own, env)
		n.HeadComment = strings.Join(j.comments, "\n")
		seq.Content = append(seq.Content, n)
	}
	if len(jobs) == 0 {
		seq.Style = yaml.FlowStyle
	}
	if len(trailing) > 0 {
		seq.FootComment = strings.Join(trailing, "\n")
	}
	root.Content = append(root.Content, str("jobs"), seq)
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: header(srcs, notes, o), Content: []*yaml.Node{root}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		// Every node is a string, a mapping or a sequence of them.
		panic("crontab: encoding the job file: " + err.Error())
	}
	enc.Close()
	return b.Bytes()
}

// header is the file's opening comment: where it comes from, and what
// differs from cron for every job.
func header(srcs []Source, notes []string, o Options) string {
	var from []string
	for _, s := range srcs {
		if s.User != "" {
			from = append(from, fmt.Sprintf("%s (%s's crontab)", s.Name, s.User))
		} else {
			from = append(from, s.Name+" (a system crontab)")
		}
	}
	scope := "- each job runs once per tick across the daemons that share the store (a\n" +
		"#   fleet); cron ran each line on every host whose crontab had it: give a job\n" +
		"#   that must run on every host scope: host (or import with --scope host)."
	if o.Scope == "host" {
		scope = "- scope: host: each job runs on every host whose daemon reads this file, as\n" +
			"#   cron did, once per host per tick."
	}
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("\n# baton: " + n)
	}
	return "# Imported by baton import crontab from " + strings.Join(from, ", ") + ".\n" +
		"# Cron's defaults are written out: shell and SHELL, PATH, the zone, running in\n" +
		"# HOME; user: sets HOME, LOGNAME and USER as cron does. Unlike cron:\n" +
		"# " + scope + "\n" +
		"# - a run still going at the next tick makes baton skip that tick (overlap:\n" +
		"#   skip); cron started another beside it.\n" +
		"# - a tick missed while no daemon ran runs once when one is back (catchup:\n" +
		"#   latest); cron ran none.\n" +
		"# - the command's environment is the daemon's with env: added; cron's held\n" +
		"#   only env:. See docs/CRON.md." + b.String()
}

// settings appends the settings s and the variables env to the mapping m,
// in settingKeys' order.
func settings(m *yaml.Node, s map[string]string, env []Var) {
	for _, k := range settingKeys {
		v, ok := s[k]
		if !ok || v == "" && k == "jitter" {
			continue
		}
		if k == "notify" {
			m.Content = append(m.Content, str("notify"), notifyNode(v))
			continue
		}
		m.Content = append(m.Content, str(k), str(v))
	}
	if len(env) > 0 {
		e := mapping()
		for _, v := range env {
			e.Content = append(e.Content, str(v.Name), str(v.Value))
		}
		m.Content = append(m.Content, str("env"), e)
	}
}

// notifyNode is the notify rule for "false", "output" or "failures".
func notifyNode(v string) *yaml.Node {
	var kinds []string
	switch v {
	case "false":
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"}
	case "output":
		kinds = []string{"output"}
	default:
		kinds = failureKinds
	}
	on := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, k := range kinds {
		on.Content = append(on.Content, str(k))
	}
	n := mapping(str("on"), on)
	n.Style = yaml.FlowStyle
	return n
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func mapping(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }

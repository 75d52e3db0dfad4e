// Package jobfile reads baton's job file: the YAML file in which users
// describe the jobs the scheduler runs.
//
// Defaults, for every key a job may leave out (baton.Job.WithDefaults
// applies them; name, schedule and command have none):
//
//	key                  default
//	timezone             UTC
//	env                  none added
//	dir                  unset: the daemon's working directory
//	ttl                  30s
//	timeout              none: a run has no time limit
//	kill_after           10s
//	jitter               0s
//	overlap              skip
//	catchup              latest
//	catchup.window       none for latest, 30s for skip, 1h for all
//	retries              0
//	retries.backoff      10s, when retries.count > 0
//	retries.max_backoff  32 × retries.backoff, when retries.count > 0
//	dst.gap              shift (fixed-time schedules; a wildcard one runs by real time)
//	dst.repeat           once  (likewise)
//	paused               false
//	history.keep         1000
//	history.max_age      720h (30 days)
//
// # The format
//
// The file is one YAML document: a mapping whose only key is jobs, a
// sequence of jobs. A file without jobs must say so, as `jobs: []`: an
// empty file, one of comments only and `jobs:` with no value are refused,
// since a daemon that loaded one would remove its jobs from the store, for
// the whole fleet, when the file was truncated or its jobs commented out by
// mistake. Every key of a job but name, schedule and command may be left
// out:
//
//	jobs:
//	  - name: backup                  # required, unique in the file
//	    schedule: "30 2 * * *"        # required: cron line, macro or @every
//	    timezone: Europe/Berlin       # IANA zone; not Local
//	    command: [pg_dump, -f, /backups/db.sql, app]  # required: argv …
//	    env:
//	      PGHOST: db.internal
//	      PGPORT: 5432                # the text as written: "5432"
//	    dir: backups                  # relative to this file's directory
//	    ttl: 1m                       # lease renewal period, at least 1s
//	    timeout: 2h                   # a run is stopped after this long
//	    kill_after: 30s               # from SIGTERM to SIGKILL
//	    jitter: 5m                    # a delay in [0, 5m), fixed per job and tick
//	    overlap: {allow: 2}           # skip | queue-one | replace | {allow: N}, 2 ≤ N ≤ 100
//	    catchup: {policy: all, window: 6h}  # skip | latest | all, or with a window
//	    retries: {count: 3, backoff: 30s, max_backoff: 10m}  # or just a count
//	    dst: {gap: skip, repeat: both}      # gap: shift | skip; repeat: once | both
//	    paused: false
//	    history: {keep: 500, max_age: 2160h}
//
//	  - name: rotate-logs
//	    schedule: "@daily"
//	    command: find /var/log/app -name '*.gz' -mtime +14 -delete  # … or a shell line
//
// A command written as a sequence is the argv, run without a shell (its
// program found on the PATH of the job's env when that sets one); one
// written as a string runs as `SHELL -c STRING`, where SHELL is the job's
// shell (default /bin/sh). A list-form command ignores shell. stdin is
// text given to the command's standard input (default: none, /dev/null). Durations are Go
// durations: 90s, 1h30m, 500ms; a bare number other than 0 is refused,
// since the unit cannot be guessed. An environment variable's name must match
// [A-Za-z_][A-Za-z0-9_]* and must not start with BATON_, which is baton's
// own; its value is the scalar's text exactly as written, so `PORT: 8080`,
// `DEBUG: true` and `EMPTY:` give "8080", "true" and "".
//
// A name is at most 200 bytes of UTF-8 (baton.MaxJobNameLen), without '/',
// control characters or bidirectional controls (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069, which make a name display as other text),
// and without '#': a job with overlap {allow: N} also holds the leases
// NAME#2 … NAME#N, which must fit in 200 bytes too; nor '@': a job with
// scope: host is stored once a host, as NAME@HOST.
//
// scope is fleet (the default, stored as "") or host; a @reboot schedule
// makes a job host-scoped, and refuses scope: fleet.
//
// Limits, so that what validates can run: a file is at most MaxFileSize
// (4 MiB); an argument, a shell line or an environment variable's
// NAME=VALUE at most MaxArgLen bytes (the kernel's MAX_ARG_STRLEN less its
// NUL); a job's arguments and variables together at most MaxCommandSize
// (256 KiB, each string counted with its NUL), well under the kernel's
// ARG_MAX, which also holds the daemon's environment.
//
// The top-level defaults mapping gives any job setting but name, schedule
// and command to every job that does not give it itself; env is merged
// variable by variable, the job's value winning. Defaults are applied as
// the file is read, so a job's version is that of the same job with every
// value written out.
//
// The reading is strict: an unknown or repeated key, a value of the wrong
// kind (a mapping where a string belongs), a setting without a value
// (`timeout:`) and a second YAML document are all refused. YAML anchors,
// aliases and merge keys (`<<: *base`, the mapping's own keys winning) are
// read as YAML means them; every alias counts at each use against
// MaxFileSize, so a file whose aliases expand it past 4 MiB (a "billion
// laughs") is refused before it is read further. A problem in an aliased
// value is reported at the line where the value is written.
//
// Parse reports every problem it finds, up to 50, in file order, as an
// *Error that prints one line per problem:
//
//	jobs.yaml:7:14: jobs[0](backup).timeout: 90 is a bare number; add a unit, such as 90s or 5m
//
// Fields are named by their path in the file; a job is named jobs[I], its
// index from 0, followed by its name in parentheses when the name is valid.
// An *Error unwraps to a *baton.Error with code EINVALID.
package jobfile

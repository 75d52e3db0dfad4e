// Package crontab reads crontabs as cronie and Vixie cron read them, and
// writes the baton job file that runs their entries as cron would have.
//
// Parse reads a user crontab (five fields, then the command) or a system
// one (/etc/crontab, /etc/cron.d/*: a user field after the schedule):
// environment lines (NAME=VALUE, quoted as cron's load_env reads them),
// each applying to the entries after it; comments; the macros @reboot,
// @yearly … @hourly; and a command's % and \% as do_command.c splits
// them (the first unescaped % ends the command, the rest is its standard
// input, % made newlines). A line it cannot import is an error naming the
// line: a sixth schedule field (a seconds field, which cron has not), a
// bad schedule, a malformed environment line.
//
// JobFile turns parsed crontabs into a job file, with cron's defaults
// (SHELL, PATH, HOME, running in HOME, the host's zone) written out and a
// warning for each line whose meaning changes in baton. docs/CRON.md says
// what baton does for each of cron's features.
package crontab

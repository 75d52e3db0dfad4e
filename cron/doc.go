// Package cron parses cron schedules and computes fire times in a time zone,
// with explicit DST policies.
//
// A schedule is matched against wall-clock time in a zone, and a wall-clock
// time is not always one instant: when clocks spring forward some wall times
// never happen (a gap), and when they fall back some happen twice (a repeat).
// Other cron libraries decide silently what happens then; here the caller
// says, with a DST:
//
//   - Gap: GapShift (the default) fires a wall time that falls in a gap at the
//     first instant after the gap, so a daily 02:30 job in Europe/Berlin runs
//     at 03:00 on the spring day instead of not at all; GapSkip does not fire
//     it that day.
//   - Repeat: RepeatOnce (the default) fires a repeated wall time once, at its
//     first (earlier) occurrence; RepeatBoth fires it at both.
//
// The policies are for fixed-time schedules. A wildcard schedule, one whose
// minute or hour field is written starting with '*' (`*/20 * * * *`,
// `0 * * * *`, `*/15 2 * * *`, @hourly), runs by real time, as Vixie cron
// and cronie run such jobs: at both occurrences of a repeated wall time, so
// that `*/20 * * * *` fires every 20 minutes through a fall-back night, and
// not for the wall times of a gap, which a frequent job does not need to
// catch up. DST.ApplyToWildcard applies the policies to wildcard schedules
// too. A range is a fixed time: `0 1-3 * * *` keeps its policy.
//
// A tick is identified by its instant in UTC, so wall times that map to the
// same instant are one tick: under GapShift, `0,15,30,45 2 * * *` fires once
// on the spring day in Berlin (at 03:00), not four times, and `0 2,3 * * *`
// fires once at 03:00 although both 02:00 and 03:00 match.
//
// Schedules written `@every DURATION` are not wall-clock schedules: they fire
// at the Unix epoch plus whole multiples of the duration, so DST never
// affects them.
//
// @reboot fires when a daemon starts: it has no instants, and Next never
// returns one for it (Schedule.Reboot tells it apart).
//
// The package has no zone data of its own: zones come from the caller's
// *time.Location. Programs that must run where the system has none can
// import time/tzdata.
package cron

package main

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton"
)

// hostZone names the host's local zone when it is not UTC ("" when it is):
// cron reads a schedule in that zone, baton in UTC unless a job says timezone,
// so a crontab moved over unchanged would fire at other hours. A zone is
// UTC when its offset is 0 now and half a year from now (either side of
// any daylight saving time), whatever its name (Etc/UTC, GMT).
func hostZone(now time.Time) string {
	_, off := now.In(time.Local).Zone()
	_, later := now.AddDate(0, 6, 0).In(time.Local).Zone()
	if off == 0 && later == 0 {
		return ""
	}
	if tz, ok := os.LookupEnv("TZ"); ok && tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	if link, err := os.Readlink("/etc/localtime"); err == nil {
		if i := strings.Index(link, "zoneinfo/"); i >= 0 {
			return link[i+len("zoneinfo/"):]
		}
		return filepath.Base(link)
	}
	name, _ := now.In(time.Local).Zone()
	return name
}

// zoneWarning is the warning for job j, which has no timezone, on a host whose
// zone is zone (hostZone; "" for none): one per job, from validate and
// from the daemon's start.
func zoneWarning(j baton.Job, zone string) string {
	if j.Timezone != "" || zone == "" {
		return ""
	}
	return "no timezone: its schedule " + j.Schedule + " is read in UTC, not in this host's zone " + cmp.Or(zone, "local") +
		" as cron would; set timezone: " + zone + " to keep cron's hours, or timezone: UTC to say so (docs/JOBS.md)"
}

package jobfile_test

import (
	"fmt"

	"github.com/batonhq/baton/jobfile"
)

func ExampleParse() {
	const src = `
jobs:
  - name: backup
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    command: [pg_dump, -f, /backups/db.sql, app]
    timeout: 2h
    retries: 3
  - name: rotate-logs
    schedule: "@daily"
    command: find /var/log/app -name '*.gz' -mtime +14 -delete
    overlap: queue-one
`
	f, err := jobfile.Parse("/etc/baton/jobs.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range f.Jobs {
		fmt.Printf("%s: %q in %s, shell %v: %s\n", j.Name, j.Schedule, j.Timezone, j.Shell, j.CommandString())
		fmt.Printf("  ttl %v, timeout %v, overlap %s, catch-up %s, retries %d\n",
			j.TTL, j.Timeout, j.Overlap.Policy, j.Catchup.Policy, j.Retries.Count)
	}

	_, err = jobfile.Parse("/etc/baton/jobs.yaml", []byte(`
jobs:
  - name: backup
    schedule: "0 0 30 2 *"
    command: pg_dump
    timeout: 90
`))
	fmt.Println(err)
	// Output:
	// backup: "30 2 * * *" in Europe/Berlin, shell false: pg_dump -f /backups/db.sql app
	//   ttl 30s, timeout 2h0m0s, overlap skip, catch-up latest, retries 3
	// rotate-logs: "@daily" in , shell true: find /var/log/app -name '*.gz' -mtime +14 -delete
	//   ttl 30s, timeout 0s, overlap queue-one, catch-up latest, retries 0
	// /etc/baton/jobs.yaml:4:15: jobs[0](backup).schedule: day-of-month: schedule never fires: day "30" does not exist in month "2"
	// /etc/baton/jobs.yaml:6:14: jobs[0](backup).timeout: 90 is a bare number; add a unit, such as 90s or 5m
}

package baton

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ForHost returns host's instance of the host-scoped job j: the job as the
// store keeps it for the daemons of that host, named InstanceName(j.Name,
// host), with Host set. Each instance has its own lease (its name), tokens,
// ticks and history.
func (j Job) ForHost(host string) Job {
	j.Name, j.Host = InstanceName(j.Name, host), host
	return j
}

// InstanceName names host's instance of a host-scoped job: JOB@HOST. A job
// file's names have no '@', so the first '@' ends the job's name.
func InstanceName(job, host string) string { return job + "@" + host }

// MaxHostLen bounds a daemon's host identity.
const MaxHostLen = 128

// ValidateHost checks a daemon's host identity (the host name, or the
// daemon's --host): not empty, at most MaxHostLen bytes of UTF-8, and none
// of '/', '@', '#', spaces or control characters, so that JOB@HOST is a job
// name in every store and its slot leases (JOB@HOST#2) read one way.
func ValidateHost(host string) error {
	switch {
	case host == "":
		return Invalid("host", "the host identity is empty")
	case len(host) > MaxHostLen:
		return Invalid("host", "%q is %d bytes long, the limit is %d", host, len(host), MaxHostLen)
	case !utf8.ValidString(host):
		return Invalid("host", "%q is not valid UTF-8", host)
	case strings.ContainsAny(host, "/@#"):
		return Invalid("host", "%q contains '/', '@' or '#'", host)
	}
	for _, r := range host {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return Invalid("host", "%q contains a space or a control character", host)
		}
	}
	return nil
}

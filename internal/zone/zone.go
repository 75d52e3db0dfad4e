// Package zone loads IANA time zones once for many uses.
//
// time.LoadLocation reads and parses the zone's tzdata file on every call
// (a few KB of garbage each time). baton compiles schedules per job and per
// read: a daemon's file of 10,000 jobs in one zone, or the dashboard's
// overview reading them every second, read the same file 10,000 times. Load
// keeps each zone it loaded for a while instead.
package zone

import (
	"sync"
	"time"
)

// TTL is how long a loaded zone is used before its tzdata is read again, so
// that a long-running daemon picks up the system's tzdata updates.
const TTL = 10 * time.Minute

type entry struct {
	loc *time.Location
	at  time.Time
}

var (
	mu     sync.Mutex
	loaded = map[string]entry{}
)

// Load is time.LoadLocation, sharing each zone's *time.Location (which is
// safe for concurrent use) among its callers for TTL. Errors are not kept.
func Load(name string) (*time.Location, error) {
	now := time.Now()
	mu.Lock()
	e, ok := loaded[name]
	mu.Unlock()
	if ok && now.Sub(e.at) < TTL {
		return e.loc, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	loaded[name] = entry{loc, now}
	mu.Unlock()
	return loc, nil
}

package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Fleet compares the running daemons' job files with the store's
// definitions in the store, and finds what comparing each daemon's
// versions (as Daemons reads them) job by job finds: a job a file lacks,
// or has at another version; not a removed job, not a job only the file
// has, not a daemon outside the window.
func TestFleetDriftAsVersions(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var jobs []baton.Job
		for _, name := range []string{"a", "b", "c", "gone"} {
			jobs = append(jobs, job(name, "0 * * * * *", "true"))
		}
		if _, err := e.store.Publish(ctx, jobs, "h", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Publish(ctx, jobs[:3], "h", []string{"gone"}); err != nil {
			t.Fatal(err)
		}
		stored, err := e.store.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		current := map[string]string{}
		for name, v := range stored {
			current[name] = v.Version
		}
		for _, d := range []scheduler.DaemonInfo{
			{ID: "same", Versions: current},
			{ID: "mixed", Versions: map[string]string{"a": "old", "c": current["c"], "extra": "x", "gone": "y"}},
			{ID: "empty", Versions: map[string]string{}},
			{ID: "away", Versions: map[string]string{}},
		} {
			d.Host, d.PID, d.Config = "host-"+d.ID, 1, "/etc/baton/"+d.ID+".yaml"
			if err := e.store.Register(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.store.Exec(ctx, "update @schema@.daemons set seen_at = @before($1)@ where id = $2", 600000, "away"); err != nil {
			t.Fatal(err)
		}

		daemons, drift, err := e.store.Fleet(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range daemons {
			ids = append(ids, d.ID)
			if d.Versions != nil || d.Host != "host-"+d.ID || d.Config == "" || d.Seen.IsZero() {
				t.Errorf("Fleet's daemon %+v: want its host, config and times, no versions", d)
			}
		}
		slices.Sort(ids)
		if want := []string{"empty", "mixed", "same"}; !slices.Equal(ids, want) {
			t.Errorf("Fleet's daemons %v, want %v", ids, want)
		}
		var got []string
		for _, f := range drift {
			got = append(got, f.Daemon+" "+f.Job+" "+f.Version)
		}
		slices.Sort(got)

		full, err := e.store.Daemons(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range full {
			for name, v := range current {
				if name == "gone" {
					continue // removed
				}
				if have, ok := d.Versions[name]; !ok || have != v {
					want = append(want, d.ID+" "+name+" "+have)
				}
			}
		}
		slices.Sort(want)
		if len(want) != 5 || !slices.Equal(got, want) {
			t.Errorf("Fleet's drift:\n  %q\nwant (from the daemons' versions, 5):\n  %q", got, want)
		}
	})
}

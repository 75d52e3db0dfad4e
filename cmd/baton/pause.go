package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/batonhq/baton"
)

const pauseHelp = `
Usage: baton pause [--note TEXT] JOB
       baton resume JOB

pause stops scheduling JOB in every daemon: no ticks are created while it
is paused (a running tick finishes; 'baton trigger' still works). resume
schedules it again from now: the ticks of the paused time are not caught up.
The pause and its note show in 'baton jobs'. Pausing a paused job without
--note keeps its note; --note '' clears it.

Exit status: 0 done; 64 usage error; 66 no such job; 69 store unavailable;
70 internal error.

Examples:
  # stop scheduling backup, with a note that baton jobs shows
  baton pause --note 'disk replaced, until Monday' backup

  # schedule backup again from now
  baton resume backup
`

// PauseCommand is `baton pause` and, with resume set, `baton resume`.
type PauseCommand struct {
	env    *Env
	store  storeFlags
	resume bool
	note   string
}

// Run pauses or resumes the job.
func (c *PauseCommand) Run(ctx context.Context, args []string) error {
	name := "pause"
	if c.resume {
		name = "resume"
	}
	fs := newFlagSet(name, c.env.Stdout, pauseHelp)
	c.store.register(fs)
	if !c.resume {
		fs.StringVar(&c.note, "note", "", "why it is paused, shown by 'baton jobs'")
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("arguments", "want one job name, got %d arguments", len(pos))
	}
	st, err := c.store.openSchedule(ctx, c.env, name)
	if err != nil {
		return err
	}
	defer st.close()
	if c.resume {
		err = st.schedule.Resume(ctx, pos[0])
	} else {
		err = c.pause(ctx, st, pos[0], noted(fs, "note"))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "%sd %s\n", name, pos[0])
	return nil
}

// pause pauses job with --note, or without it (noted false) with the note
// the job has, so that pausing again does not erase why it was paused.
func (c *PauseCommand) pause(ctx context.Context, st *store, job string, noted bool) error {
	note := c.note
	if !noted {
		dj, err := st.schedule.Job(ctx, job)
		if err != nil {
			return err
		}
		note = dj.PausedNote
	}
	return st.schedule.Pause(ctx, job, note)
}

// noted says whether flag name was given on the command line.
func noted(fs *flagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

package procfs_test

import (
	"os"
	"testing"

	"github.com/batonhq/baton/procfs"
)

func TestParseStat(t *testing.T) {
	// Field 22 is starttime; the command name holds ") (" and spaces.
	line := "4242 (a) (b c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654321 1000 200 18446744073709551615\n"
	st, err := procfs.ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'S' || st.PPID != 17 || st.StartTicks != 987654321 {
		t.Fatalf("parsed %+v, want state S, ppid 17, start ticks 987654321", st)
	}
	for _, bad := range []string{"", "4242 (x S 1", "4242 (x) S 1 2 3"} {
		if _, err := procfs.ParseStat([]byte(bad)); err == nil {
			t.Errorf("procfs.ParseStat(%q) succeeded", bad)
		}
	}
}

func TestReadStatAndArgvOfSelf(t *testing.T) {
	st, err := procfs.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getppid() || st.Zombie() || st.StartTicks == 0 {
		t.Fatalf("own stat %+v, want ppid %d, alive, a start time", st, os.Getppid())
	}
	if argv := procfs.Argv(os.Getpid()); len(argv) == 0 || argv[0] != os.Args[0] {
		t.Fatalf("own argv %q, want it to start with %q", argv, os.Args[0])
	}
	if argv := procfs.Argv(1 << 30); argv != nil {
		t.Fatalf("argv of a pid that cannot exist: %q", argv)
	}
}

package guard

// Protocol names what the guard does and how it talks to its supervisor:
// its flags, descriptors, signals and reports, and its tree guarantees. A
// supervisor passes the protocol it expects (--protocol), and a guard of
// another refuses before it starts anything (Report.Refused), so that a
// baton-guard left from another build is never trusted with a run.
//
// It is derived from this package's code: TestProtocolFollowsTheCode fails,
// naming the new value, when any file of the package but this one and its
// tests changes. A variable, not a constant, only so that a test can build
// a guard of another protocol (-ldflags -X).
var Protocol = "7195def02f"

// ProtocolLine starts the line on which baton-guard --version names its
// Protocol, as baton doctor local reads it.
const ProtocolLine = "Guard protocol: "

// The guard protocol this C guard speaks: guard.Protocol of the same
// build (TestCGuardSpeaksTheProtocol in package supervise/guard keeps them
// equal). A build may name another, as tests do for a guard of "another
// build": CGO_CFLAGS=-DBATON_GUARD_PROTOCOL='"x"'.
#ifndef BATON_GUARD_PROTOCOL
#define BATON_GUARD_PROTOCOL "7195def02f"
#endif

package baton

import (
	"errors"
	"fmt"
)

// Code classifies an error. The set is small on purpose: every adapter
// translates its own errors into one of these at its edge, and the CLI and the
// HTTP server map codes to exit and HTTP statuses in one place each.
type Code string

const (
	EINVALID     Code = "invalid"     // bad input: flag, config, name, DSN
	ENOTFOUND    Code = "not_found"   // the thing named does not exist
	ECONFLICT    Code = "conflict"    // a concurrent change won
	EBUSY        Code = "busy"        // the lease is held by someone else
	ELEASELOST   Code = "lease_lost"  // the caller's term is over
	EFENCED      Code = "fenced"      // a write carried a token older than one already seen
	EUNAVAILABLE Code = "unavailable" // the store cannot be reached or refused a connection
	EINTERNAL    Code = "internal"    // a bug or an unexpected state
)

// Error is the one error type of baton. Field names the input at fault, when
// there is one, so that a user can be told which flag or setting to fix.
type Error struct {
	Code    Code
	Field   string
	Message string
	Err     error // the cause, if any; never shown to users with secrets in it
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code that wraps err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// Exit statuses of the baton command. A command run by baton exits with its
// own status (128+n when killed by signal n); these are baton's own, chosen
// from sysexits(3) where one fits so that cron and systemd users recognise them.
const (
	ExitOK          = 0
	ExitUsage       = 64  // EX_USAGE: bad flag, argument or setting
	ExitUnavailable = 69  // EX_UNAVAILABLE: the store cannot be reached
	ExitNotFound    = 66  // EX_NOINPUT: the job, event or lease named does not exist
	ExitInternal    = 70  // EX_SOFTWARE: a bug in baton
	ExitBusy        = 75  // EX_TEMPFAIL: not run, the lease is held elsewhere
	ExitLeaseLost   = 76  // the lease was lost while the command ran; it was stopped
	ExitFenced      = 77  // a write was refused: its fencing token is stale
	ExitUnknown     = 78  // retries ran out with no answer to a write that may have arrived: the far side may have done it
	ExitTimedOut    = 124 // as timeout(1): the run passed its time limit and was stopped
)

// ExitStatus maps an error to the exit status of the baton command.
func ExitStatus(err error) int {
	switch ErrorCode(err) {
	case "":
		return ExitOK
	case EINVALID:
		return ExitUsage
	case ENOTFOUND:
		return ExitNotFound
	case EUNAVAILABLE:
		return ExitUnavailable
	case EBUSY:
		return ExitBusy
	case ELEASELOST:
		return ExitLeaseLost
	case EFENCED:
		return ExitFenced
	default:
		return ExitInternal
	}
}

// HTTPStatus maps an error to the status of an HTTP response, as ExitStatus
// does to an exit status, so that every HTTP adapter answers alike. The
// statuses are numbers here so that the domain package needs no net/http.
// A stale fencing token is a 409, like a lost race: the write conflicts
// with the newer term's work. Unlike a lost race it never succeeds on a
// retry; clients tell the two apart by the problem's type.
func HTTPStatus(err error) int {
	switch ErrorCode(err) {
	case "":
		return 200 // OK
	case EINVALID:
		return 400 // Bad Request
	case ENOTFOUND:
		return 404 // Not Found
	case ECONFLICT, EBUSY, ELEASELOST, EFENCED:
		return 409 // Conflict
	case EUNAVAILABLE:
		return 503 // Service Unavailable
	default:
		return 500 // Internal Server Error
	}
}

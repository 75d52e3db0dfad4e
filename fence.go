package baton

import "context"

// HighWater keeps, for each resource, the highest fencing token that a write
// to it has carried, and refuses a write whose token is below that mark: the
// fence of a result store that is not baton's own store (another database,
// a file, an HTTP service). Equal tokens pass, so one term may write many
// times.
type HighWater interface {
	// Advance raises resource's mark to token, or returns an EFENCED error
	// naming both tokens when token is below it. Implementations serialise
	// Advance against itself per resource.
	Advance(ctx context.Context, resource string, token int64) error
}

// Fenced returns the EFENCED error for a write to resource with token, below
// the highest token seen.
func Fenced(resource string, token, highest int64) *Error {
	return Errorf(EFENCED, "write to %s with fencing token %d refused: token %d was already seen (a newer holder has taken over)", resource, token, highest)
}

// MaxResourceLen bounds resource names, which may become file names.
const MaxResourceLen = 200

// ValidateResource checks a resource name as ValidateJobName checks a job's.
func ValidateResource(name string) error {
	if err := ValidateJobName(name); err != nil {
		e := err.(*Error)
		return Invalid("resource", "%s", e.Message)
	}
	return nil
}

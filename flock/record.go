package flock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// A lock file (and a fence file) holds one record: a JSON object with the
// fields of state, written whole under the file's flock. The record keeps the
// job's fencing token, so it is read strictly: exactly one object, no field
// baton does not write, no key twice, and a token in 1..maxToken. Anything
// else is damage, and the caller refuses it with an error naming the file;
// it never restarts, lowers or wraps the token. A file that baton makes
// holds its first record from the moment it appears at its path (see
// openLockFile), so even an empty file is damage, not a new job.

// maxToken is the largest token a record may hold, 2^62: tokens stay far from
// int64's wrap, and the bits above are left for an epoch (a store's
// generation) that may later be put above the count.
const maxToken = 1 << 62

// maxStateSize keeps the state in one small write, which the kernel does not
// interleave with a reader's read of the same file.
const maxStateSize = 4096

// stateFields are the keys a record may have: the JSON names of state's
// fields, exactly as baton writes them.
var stateFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[state]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}()

// readState reads and checks the record of a lock or fence file.
func readState(f *os.File) (state, error) {
	return readStateWith(f, make([]byte, maxStateSize+1))
}

// readStateWith is readState reading into buf, maxStateSize+1 bytes long,
// which a reader of many lock files uses for each of them.
func readStateWith(f *os.File, buf []byte) (state, error) {
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return state{}, err
	}
	if n > maxStateSize {
		return state{}, fmt.Errorf("it is larger than the %d bytes baton writes", maxStateSize)
	}
	return parseState(buf[:n])
}

// parseState parses a record strictly (see above).
func parseState(b []byte) (state, error) {
	b = bytes.Trim(b, " \t\r\n") // JSON's white space; baton ends a record with a newline
	if len(b) == 0 {
		return state{}, errors.New("it is empty")
	}
	if b[0] != '{' {
		return state{}, errors.New("it is not a JSON object")
	}
	if err := checkKeys(b); err != nil {
		return state{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var st state
	if err := dec.Decode(&st); err != nil {
		return state{}, fmt.Errorf("parsing: %w", err)
	}
	if dec.InputOffset() != int64(len(b)) {
		return state{}, errors.New("it has more than one record, or bytes after its record")
	}
	if st.Token < 1 || st.Token > maxToken {
		if bytes.Contains(b, []byte(`"token"`)) {
			return state{}, fmt.Errorf("its token %d is not in 1..2^62", st.Token)
		}
		return state{}, errors.New("it has no token")
	}
	return st, nil
}

// checkKeys refuses a key given twice in any object, which encoding/json
// would resolve silently to its last value ({"token":50,"token":2} reads as
// 2), and a top-level key that is not a field of state, in any case (json
// matches field names without regard to case).
func checkKeys(b []byte) error {
	type frame struct {
		keys    map[string]bool // nil in an array
		wantKey bool
	}
	var stack []*frame
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parsing: %w", err)
		}
		if len(stack) > 0 && stack[len(stack)-1].wantKey {
			top := stack[len(stack)-1]
			if key, ok := tok.(string); ok {
				switch {
				case top.keys[key]:
					return fmt.Errorf("it has the key %q twice", key)
				case len(stack) == 1 && !stateFields[key]:
					return fmt.Errorf("it has the unknown field %q", key)
				}
				top.keys[key] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

func writeState(f *os.File, st state, sync bool) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if len(b)+1 > maxStateSize {
		st.Argv = []string{"(argv too long to record)"}
		if b, err = json.Marshal(st); err != nil {
			return err
		}
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	if sync {
		return unix.Fdatasync(int(f.Fd()))
	}
	return nil
}

// repairHint says how an operator mends a damaged record: by hand, with a
// token at least as high as the last one that was handed out, because only
// they can know it. Removing the file would restart the token at 1.
func repairHint(path string) string {
	return fmt.Sprintf("when no run of it is going, write the last token it handed out (or any higher one) as its record, "+
		"e.g. echo '{\"token\":N}' > %s; the last token is in its runs' BATON_FENCING_TOKEN, `baton daemon` history and "+
		"the fence marks it wrote. Do not remove the file: that restarts the token at 1", baton.ShellQuote(path))
}

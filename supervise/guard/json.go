package guard

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r as one line of JSON, as encoding/json would encode
// it (the same fields, omitted when empty), to b.
func (r Report) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	if r.Started != 0 {
		b = append(b, `"started":`...)
		b = strconv.AppendInt(b, int64(r.Started), 10)
		b = append(b, ',')
	}
	if r.Done {
		b = append(b, `"done":true,`...)
	}
	b = append(b, `"exit_code":`...)
	b = strconv.AppendInt(b, int64(r.ExitCode), 10)
	if len(r.Strays) > 0 {
		b = append(b, `,"strays":[`...)
		for i, p := range r.Strays {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendInt(b, int64(p.PID), 10)
			b = append(b, `,"argv":`...)
			if p.Argv == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, '[')
				for j, a := range p.Argv {
					if j > 0 {
						b = append(b, ',')
					}
					b = appendString(b, a)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, r.Error)
	}
	if r.TrustExpired {
		b = append(b, `,"trust_expired":true`...)
	}
	if r.Refused {
		b = append(b, `,"refused":true`...)
	}
	return append(b, '}', '\n')
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does; a process's argv is any bytes).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

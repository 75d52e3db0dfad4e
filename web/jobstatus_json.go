package web

import (
	"encoding/json"
	"strconv"
	"time"
)

// AppendIndentedJSON appends j as json.MarshalIndent(j, prefix, "  ")
// writes it, byte for byte, without reflection: baton status --json writes
// 10,000 of them, and encoding/json's two passes (encode, then indent)
// were most of its CPU. TestJobStatusJSON holds it to encoding/json's
// output with every field set; a field added to JobStatus must be added
// here.
func (j *JobStatus) AppendIndentedJSON(b []byte, prefix string) ([]byte, error) {
	o := jsonObject{b: append(b, '{'), in: prefix + "  "}
	o.str("name", j.Name)
	o.str("schedule", j.Schedule)
	if j.Timezone != "" {
		o.str("timezone", j.Timezone)
	}
	o.str("version", j.Version)
	o.time("next_tick", j.NextTick)
	if j.LastOutcome != "" {
		o.str("last_outcome", string(j.LastOutcome))
	}
	o.time("last_tick", j.LastTick)
	o.time("last_success", j.LastSuccess)
	if j.SuccessAge != "" {
		o.str("last_success_age", j.SuccessAge)
	}
	if j.Interval != 0 {
		o.str("expected_interval", j.Interval.String())
	}
	o.bool("overdue", j.Overdue)
	o.bool("paused", j.Paused)
	if j.PausedNote != "" {
		o.str("paused_note", j.PausedNote)
	}
	if len(j.Drift) > 0 {
		o.key("drift")
		o.b = append(o.b, '[')
		for i, d := range j.Drift {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = append(o.b, '\n')
			o.b = append(o.b, o.in...)
			o.b = append(o.b, "  "...)
			o.b = appendJSONString(o.b, d)
		}
		o.b = append(o.b, '\n')
		o.b = append(o.b, o.in...)
		o.b = append(o.b, ']')
	}
	o.key("feature_level")
	o.b = strconv.AppendInt(o.b, int64(j.FeatureLevel), 10)
	if j.LevelNote != "" {
		o.str("level_note", j.LevelNote)
	}
	if j.Host != "" {
		o.str("host", j.Host)
	}
	if j.HostNote != "" {
		o.str("host_note", j.HostNote)
	}
	o.b = append(o.b, '\n')
	o.b = append(o.b, prefix...)
	return append(o.b, '}'), o.err
}

// jsonObject writes an indented object's members, as encoding/json's
// MarshalIndent lays them out: each on a line of its own at in.
type jsonObject struct {
	b   []byte
	in  string
	n   int   // members written
	err error // the first value that does not encode
}

// key starts a member: the comma after the last one, the line, the key.
func (o *jsonObject) key(k string) []byte {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(o.b, '\n')
	o.b = append(o.b, o.in...)
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, "\": "...)
	return o.b
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = appendJSONString(o.b, v)
}

func (o *jsonObject) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// time writes t as time.Time's MarshalJSON does, and nothing for the
// zero time (omitzero).
func (o *jsonObject) time(k string, t time.Time) {
	if t.IsZero() {
		return
	}
	v, err := t.MarshalJSON() // fails on a year past 9999, as encoding/json does
	if err != nil && o.err == nil {
		o.err = err
	}
	o.key(k)
	o.b = append(o.b, v...)
}

// appendJSONString appends s quoted as encoding/json quotes it (with its
// HTML escaping): plain printable ASCII as it is, anything else through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

package web

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// AppendIndentedJSON writes what json.MarshalIndent writes, byte for
// byte: with no field set, with every field set (found by reflection, so
// that a field added to JobStatus and not to AppendIndentedJSON fails
// here), and with the strings and instants encoding/json treats apart.
func TestJobStatusJSON(t *testing.T) {
	odd := "a<b>&c \"q\" \\ \u2028\u2029 é \x01\x1f \xff end"
	zone := time.FixedZone("", -(3*3600 + 30*60))
	every := JobStatus{}
	v := reflect.ValueOf(&every).Elem()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Tag.Get("json") == "-" {
			continue
		}
		switch {
		case sf.Type == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Date(2026, 12, 2, 18, 4, 5, 123456789, zone).Add(time.Duration(i) * time.Hour)))
		case sf.Type == reflect.TypeFor[baton.Duration]():
			f.SetInt(int64(90*time.Second + 250*time.Millisecond))
		case sf.Type.Kind() == reflect.String:
			f.SetString(sf.Name + " " + odd)
		case sf.Type.Kind() == reflect.Bool:
			f.SetBool(true)
		case sf.Type.Kind() == reflect.Int:
			f.SetInt(int64(7 + i))
		case sf.Type == reflect.TypeFor[[]string]():
			f.Set(reflect.ValueOf([]string{"one", odd, ""}))
		default:
			t.Fatalf("JobStatus.%s is a %s, which this test (and AppendIndentedJSON) does not know", sf.Name, sf.Type)
		}
	}
	cases := map[string]JobStatus{
		"none set":  {},
		"every set": every,
		"plain": {Name: "j00001", Schedule: "0 * * * *", Version: "3f2a", NextTick: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			LastOutcome: baton.OutcomeSucceeded, Drift: []string{"x"}, Interval: baton.Duration(-time.Minute), FeatureLevel: -1},
	}
	// Each character encoding/json treats apart, alone in a plain string.
	for _, c := range []string{"<", ">", "&", `"`, `\`, "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff"} {
		cases["alone: "+c] = JobStatus{Name: "a" + c + "b", Drift: []string{c}}
	}
	for name, js := range cases {
		for _, prefix := range []string{"", "    "} {
			want, err := json.MarshalIndent(&js, prefix, "  ")
			if err != nil {
				t.Fatal(err)
			}
			got, err := js.AppendIndentedJSON([]byte("kept:"), prefix)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "kept:"+string(want) {
				t.Errorf("%s, prefix %q: AppendIndentedJSON wrote\n%s\njson.MarshalIndent\n%s", name, prefix, got, want)
			}
		}
	}
	// An instant encoding/json refuses is refused.
	bad := JobStatus{LastTick: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(&bad); err == nil {
		t.Fatal("encoding/json encodes the year 10000 now: revisit this case")
	}
	if _, err := bad.AppendIndentedJSON(nil, ""); err == nil {
		t.Error("AppendIndentedJSON encoded the year 10000")
	}
}

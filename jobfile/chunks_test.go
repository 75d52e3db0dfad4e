package jobfile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// countNodes is the number of YAML nodes in the tree at n.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

// largestTree parses data with Parse and returns the most YAML nodes it
// held in one decoded document.
func largestTree(t *testing.T, data []byte) int {
	t.Helper()
	most := 0
	decodedHook = func(doc *yaml.Node) { most = max(most, countNodes(doc)) }
	defer func() { decodedHook = nil }()
	if _, err := Parse("jobs.yaml", data); err != nil {
		t.Fatal(err)
	}
	return most
}

// A large file is decoded a few hundred jobs at a time: the YAML node tree
// of a whole file of 10,000 jobs (over 20 MB with a retries setting each)
// was the daemon's peak of memory.
func TestParseLargeFileInChunks(t *testing.T) {
	var b strings.Builder
	b.WriteString("# many jobs\nnotify: {on: [failed]}\njobs:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "  - name: j%05d\n    schedule: \"%d * * * * *\"\n    command: [\"true\"]\n    retries: {count: 1, backoff: 1s}\n", i, i%60)
	}
	data := []byte(b.String())
	whole := countNodes(mustDecode(t, data))
	most := largestTree(t, data)
	if most > whole/20 {
		t.Errorf("Parse held %d YAML nodes at once, against %d in the whole file: want at most a twentieth", most, whole)
	}
	assertSameParse(t, data, chunkJobs)
}

func mustDecode(t *testing.T, data []byte) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// assertSameParse checks that Parse, in chunks of each size in sizes (or
// of 1, 2, 3, 7 and 200 jobs), gives what one parse of the whole file
// gives: the same jobs, or the same problems.
func assertSameParse(t *testing.T, data []byte, sizes ...int) {
	t.Helper()
	wantFile, wantErr := parseWhole("jobs.yaml", data)
	if len(sizes) == 0 {
		sizes = []int{1, 2, 3, 7, chunkJobs}
	}
	for _, per := range sizes {
		gotFile, gotErr := parse("jobs.yaml", data, per)
		if !reflect.DeepEqual(gotFile, wantFile) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("chunks of %d jobs: got %+v, %v\nwant %+v, %v\nfile:\n%s", per, gotFile, gotErr, wantFile, wantErr, data)
		}
	}
}

// Files whose text could mislead a split at the lines that start a job:
// each must parse as one parse of the whole file does.
func TestParseInChunksAgrees(t *testing.T) {
	job := func(i int) string {
		return fmt.Sprintf("  - name: j%d\n    schedule: '@every 1m'\n    command: [\"true\"]\n", i)
	}
	jobs := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(job(i))
		}
		return b.String()
	}
	for name, src := range map[string]string{
		"plain":                 "jobs:\n" + jobs(9),
		"notify after":          "jobs:\n" + jobs(9) + "notify: {on: [failed]}\n",
		"notify before":         "notify:\n  on: [failed]\njobs:\n" + jobs(9),
		"comment on jobs":       "jobs: # the jobs\n" + jobs(9),
		"at column 0":           "jobs:\n" + strings.ReplaceAll(strings.ReplaceAll(jobs(9), "\n    ", "\n  "), "  - ", "- "),
		"deeper":                "jobs:\n" + strings.ReplaceAll("  "+jobs(9), "\n", "\n  ")[:len(jobs(9))+2*27],
		"crlf":                  strings.ReplaceAll("jobs:\n"+jobs(9), "\n", "\r\n"),
		"no final newline":      strings.TrimSuffix("jobs:\n"+jobs(9), "\n"),
		"comments between":      "jobs:\n" + strings.ReplaceAll(jobs(9), "  - name", "# c\n  # d\n\n  - name"),
		"dash alone":            "jobs:\n" + strings.ReplaceAll(jobs(9), "  - name", "  -\n    name"),
		"block scalar":          "jobs:\n" + strings.ReplaceAll(jobs(9), "command: [\"true\"]", "command: |+\n      true\n      - x\n\n"),
		"quoted across a job":   "jobs:\n" + jobs(3) + "  - name: q\n    schedule: '@every 1m'\n    command: [\"echo\", \"a\n  - name: b\n    c\"]\n" + jobs(4),
		"flow across a job":     "jobs:\n" + jobs(3) + "  - name: f\n    schedule: '@every 1m'\n    command: [echo,\n  - x, y]\n" + jobs(4),
		"duplicate across":      "jobs:\n" + jobs(5) + job(1) + jobs(0),
		"problem in a job":      "jobs:\n" + jobs(5) + "  - name: bad\n    schedule: nope\n    command: [x]\n" + jobs(3),
		"anchor and alias":      "jobs:\n" + jobs(3) + "  - &a {name: a, schedule: '@every 1m', command: [x]}\n" + jobs(3) + "  - *a\n",
		"two jobs keys":         "jobs:\n" + jobs(4) + "jobs:\n" + jobs(4),
		"quoted jobs key":       "\"jobs\": []\nnotify: \"x\njobs:\n" + jobs(4) + "y\"\n",
		"jobs in a string":      "notify: \"x\njobs:\n" + jobs(4) + "y\"\n",
		"second document":       "jobs:\n" + jobs(5) + "---\nx: 1\n",
		"key at item indent":    "jobs:\n" + jobs(5) + "  x: 1\n" + jobs(2),
		"less indented content": "jobs:\n" + jobs(5) + " x: 1\n",
		"tab":                   "jobs:\n" + jobs(5) + "\t- name: t\n",
		"not a sequence":        "jobs:\n  name: a\n",
		"empty":                 "jobs:\n",
		"one job":               "jobs:\n" + jobs(1),
		"defaults":              "defaults:\n  ttl: 1m\n  env: {A: b}\njobs:\n" + strings.ReplaceAll(jobs(9), "  - name", "  - env: {C: d}\n    name"),
		"defaults after":        "jobs:\n" + jobs(9) + "defaults: {timezone: Europe/Berlin}\n",
		"merge in each job":     "jobs:\n" + strings.ReplaceAll(jobs(9), "  - name", "  - <<: {ttl: 2m}\n    name"),
	} {
		t.Run(name, func(t *testing.T) {
			assertSameParse(t, []byte(src))
			// The shapes above the line are read in chunks; the others
			// fall back to one parse of the whole file.
			_, wantChunks := map[string]bool{
				"plain": true, "notify after": true, "notify before": true, "comment on jobs": true,
				"at column 0": true, "deeper": true, "crlf": true, "no final newline": true,
				"comments between": true, "dash alone": true, "block scalar": true,
				"defaults": true, "defaults after": true, "merge in each job": true,
			}[name]
			chunked := parseInChunks("jobs.yaml", []byte(src), 3) != nil
			if chunked != wantChunks {
				t.Errorf("read in chunks: %v, want %v", chunked, wantChunks)
			}
		})
	}
}

// FuzzParseInChunks: for any input, Parse in chunks of one job agrees with
// one parse of the whole file.
func FuzzParseInChunks(f *testing.F) {
	for _, s := range []string{
		"jobs:\n  - {name: a, schedule: '@every 1m', command: [x]}\n  - {name: b, schedule: '@every 1m', command: [x]}\n",
		"jobs:\n- name: a\n  schedule: '@every 1m'\n  command: [x]\n- name: b\n  schedule: '@every 1m'\n  command: |\n    x\n",
		"notify: {on: [failed]}\njobs:\n  - name: a\n    schedule: '@every 1m'\n    command: [\"x\n  - y\"]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		assertSameParse(t, data)
	})
}

package jobfile

import (
	"bytes"
	"iter"

	"github.com/batonhq/baton"
)

// parseInChunks parses data, a job file of the usual shape, a few jobs at a
// time: per jobs to a YAML document. The YAML library builds a tree of nodes
// for a whole document before anything reads it, about 2 KB a job, so a file
// of 10,000 jobs parsed whole held over 20 MB at once, which was the
// daemon's peak of memory; in chunks of 200 it holds a fiftieth of that.
//
// The usual shape: a line "jobs:" at the start of a line (a comment may
// follow), once in the file, then a block sequence whose items each start
// with "- " at one indentation. The file is then read as
//
//   - its skeleton: the file with the sequence's lines left out and "jobs:
//     []" in place of its key, which gives the top-level keys (notify) and
//     their problems;
//   - and its chunks: "jobs:" followed by the lines of per items, each
//     decoded as its own document, in order, through the same parser.
//
// A line that starts an item can be taken for one only where the file is
// not inside a quoted scalar or a flow collection, and a chunk that ends
// inside one does not decode. So parseInChunks gives up (returns nil) on any
// problem at all, and wherever the skeleton or a chunk is not what the split
// expects (the jobs key elsewhere, an item count that differs from the
// lines counted), and on files of fewer than two chunks, other documents
// or directives. Parse then parses the whole file as one document, which
// places every problem at its line, so a file's problems, and the jobs of a
// valid file, are the same either way (TestParseInChunksAgrees,
// FuzzParseInChunks).
func parseInChunks(path string, data []byte, per int) *File {
	keyAt := -1 // the offset of the line "jobs:"
	for at, l := range eachLine(data, 0) {
		if bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("...")) || bytes.HasPrefix(l, []byte("%")) {
			return nil // documents and directives
		}
		if rest, ok := bytes.CutPrefix(l, []byte("jobs:")); ok {
			if keyAt >= 0 || !blankOrComment(rest) {
				return nil
			}
			keyAt = at
		}
	}
	if keyAt < 0 {
		return nil
	}
	// The items: the offset where each starts, and where the sequence ends.
	indent, end := -1, len(data)
	var starts []int
	for at, l := range eachLine(data, keyAt) {
		n := len(l) - len(bytes.TrimLeft(l, " "))
		if at == keyAt || blankOrComment(l[n:]) {
			continue // a blank or a comment is kept with the item before it
		}
		if indent < 0 {
			indent = n
		}
		if n > indent {
			continue
		}
		if n == indent && item(l[n:]) {
			starts = append(starts, at)
			continue
		}
		end = at
		break
	}
	if len(starts) < 2*per {
		return nil
	}

	p := &parser{path: path}
	skeleton := append(append(append([]byte{}, data[:keyAt]...), "jobs: []\n"...), data[end:]...)
	keyLine := bytes.Count(data[:keyAt], []byte("\n")) + 1
	if p.file(skeleton, nil); len(p.problems) > 0 || p.jobsLine != keyLine || p.jobsLen != 0 {
		return nil
	}
	jobs := make([]baton.Job, 0, len(starts))
	for c := 0; c < len(starts); c += per {
		to := end
		if c+per < len(starts) {
			to = starts[c+per]
		}
		// Without a problem, p.file read this chunk's sequence (jobsLen)
		// and made a job of each of its items.
		jobs = p.file(append([]byte("jobs:\n"), data[starts[c]:to]...), jobs)
		if len(p.problems) > 0 || p.jobsLen != min(per, len(starts)-c) {
			return nil
		}
	}
	return &File{Path: path, Jobs: jobs, Notify: p.notify}
}

// eachLine yields each line of data from offset from on: its offset, and
// its text without the line ending.
func eachLine(data []byte, from int) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		for at := from; at < len(data); {
			next := len(data)
			if i := bytes.IndexByte(data[at:], '\n'); i >= 0 {
				next = at + i + 1
			}
			if !yield(at, trimEOL(data[at:next])) {
				return
			}
			at = next
		}
	}
}

// trimEOL returns l without its line ending.
func trimEOL(l []byte) []byte {
	l = bytes.TrimSuffix(l, []byte("\n"))
	return bytes.TrimSuffix(l, []byte("\r"))
}

// blankOrComment reports whether b is empty, spaces, or spaces and a comment.
func blankOrComment(b []byte) bool {
	b = bytes.TrimLeft(b, " ")
	return len(b) == 0 || b[0] == '#'
}

// item reports whether l, a line's text after its indentation, starts an
// item of a block sequence: "-" followed by a space or nothing.
func item(l []byte) bool {
	return len(l) > 0 && l[0] == '-' && (len(l) == 1 || l[1] == ' ')
}

package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The series labelled by job are most of a scrape: 17 of this daemon's a
// job (jobCollector) and 4 of the store's (the schedule's), 210,000 for a
// file of 10,000 jobs. client_golang's Gather turns every series of a
// registry into a protobuf message before it writes the first byte: some
// 100 MB for those, all live at once, which is most of the daemon's peak
// memory. So they are kept in a registry of their own (jobReg), and in the
// text format, which Prometheus scrapes by default, Handler writes them
// itself as they come (streamFamilies): no metric object, label pair or
// protobuf message is made for them. Made and converted a chunk at a time,
// as they were, a scrape of 10,000 jobs allocated over 100 MB of garbage.
// A scraper that asks for protobuf gets the whole gather, as before.

// family is one metric family of a jobSource: its Desc for the registry,
// and its name, help, type and label names for the streamed text.
type family struct {
	name, help string
	typ        dto.MetricType
	labels     []string // sorted, as client_golang sorts a series' label pairs
	desc       *prometheus.Desc
}

func newFamily(name, help string, typ dto.MetricType, labels ...string) *family {
	if !slices.IsSorted(labels) {
		panic("metrics: the labels of " + name + " are not in order")
	}
	return &family{name: name, help: help, typ: typ, labels: labels, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// jobSource makes series labelled by job, a family at a time.
type jobSource interface {
	families() []*family
	// scrape takes what one scrape shows (a read of the store, the jobs
	// to render), and returns what sends one family's series of it to
	// out. It sends f's series in order of job, each family's once.
	scrape() (emit func(f *family, out *seriesOut))
}

// seriesOut is where a jobSource sends one family's series: to the
// registry as prometheus.Metric values (send), or written as text (text).
type seriesOut struct {
	f    *family
	send func(prometheus.Metric)
	text *textWriter
}

// sample sends one series of a counter or gauge: labels are the values of
// the family's labels, in order.
func (o *seriesOut) sample(v float64, labels ...string) {
	if o.text != nil {
		o.text.sample(o.f, "", labels, "", v)
		return
	}
	typ := prometheus.GaugeValue
	if o.f.typ == dto.MetricType_COUNTER {
		typ = prometheus.CounterValue
	}
	o.send(prometheus.MustNewConstMetric(o.f.desc, typ, v, slices.Clone(labels)...))
}

// histogram sends one series of a histogram: cumulative[i] observations
// were at most bounds[i], count in all, summing to sum.
func (o *seriesOut) histogram(count uint64, sum float64, bounds []float64, cumulative []uint64, labels ...string) {
	if o.text != nil {
		for i, b := range bounds {
			o.text.sample(o.f, "_bucket", labels, o.text.bound(b), float64(cumulative[i]))
		}
		o.text.sample(o.f, "_bucket", labels, "+Inf", float64(count))
		o.text.sample(o.f, "_sum", labels, "", sum)
		o.text.sample(o.f, "_count", labels, "", float64(count))
		return
	}
	cum := make(map[float64]uint64, len(bounds))
	for i, b := range bounds {
		cum[b] = cumulative[i]
	}
	o.send(prometheus.MustNewConstHistogram(o.f.desc, count, sum, cum, slices.Clone(labels)...))
}

// sourceCollector is a jobSource as a prometheus.Collector, for the
// registry's way (Gather).
type sourceCollector struct{ src jobSource }

func (c sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.src.families() {
		ch <- f.desc
	}
}

func (c sourceCollector) Collect(ch chan<- prometheus.Metric) {
	emit := c.src.scrape()
	for _, f := range c.src.families() {
		emit(f, &seriesOut{f: f, send: func(m prometheus.Metric) { ch <- m }})
	}
}

// textWriter writes series in the text exposition format, as expfmt does
// (TestStreamedTextIsExpfmts holds them to the same bytes): a family's
// HELP and TYPE before its first series, none for a family without any.
type textWriter struct {
	w      io.Writer
	buf    []byte
	les    map[float64]string // buckets' bounds, formatted once a scrape
	headed *family
	err    error
}

// bound is b formatted as a bucket's le label: the same few bounds come for
// every job, so each is formatted once.
func (t *textWriter) bound(b float64) string {
	le, ok := t.les[b]
	if !ok {
		le = string(appendFloat(nil, b))
		t.les[b] = le
	}
	return le
}

// textFlushAt is how much text is gathered before it is written out.
const textFlushAt = 32 << 10

func (t *textWriter) sample(f *family, suffix string, labels []string, le string, v float64) {
	if t.err != nil {
		return
	}
	b := t.buf
	if t.headed != f {
		t.headed = f
		b = append(b, "# HELP "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = appendEscaped(b, f.help, false)
		b = append(b, "\n# TYPE "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, strings.ToLower(f.typ.String())...)
		b = append(b, '\n')
	}
	b = append(b, f.name...)
	b = append(b, suffix...)
	if len(labels) > 0 || le != "" {
		b = append(b, '{')
		for i, v := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f.labels[i]...)
			b = append(b, '=', '"')
			b = appendEscaped(b, v, true)
			b = append(b, '"')
		}
		if le != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, `le="`...)
			b = append(b, le...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	b = append(b, '\n')
	t.buf = b
	if len(t.buf) >= textFlushAt {
		t.flush()
	}
}

func (t *textWriter) flush() {
	if t.err == nil && len(t.buf) > 0 {
		_, t.err = t.w.Write(t.buf)
	}
	t.buf = t.buf[:0]
}

// appendFloat formats v as expfmt does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(b, '1')
	case v == 0:
		return append(b, '0')
	case v == -1:
		return append(b, "-1"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendEscaped escapes s as the text format wants: a backslash and a
// newline in HELP, and a double quote too in a label's value.
func appendEscaped(b []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quoted:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// streamFamilies writes the sources' families in the text format, each
// series as it is made.
func streamFamilies(w io.Writer, sources []jobSource) error {
	t := &textWriter{w: w, buf: make([]byte, 0, textFlushAt+4<<10), les: map[float64]string{}}
	for _, src := range sources {
		emit := src.scrape()
		for _, f := range src.families() {
			emit(f, &seriesOut{f: f, text: t})
		}
	}
	t.flush()
	return t.err
}

// serve answers one scrape: the text format streamed (the registry's
// families encoded whole, the jobs' streamed), or any other format the
// scraper asks for through promhttp with everything gathered at once.
func (m *Metrics) serve(whole http.Handler, w http.ResponseWriter, r *http.Request) {
	format := expfmt.Negotiate(r.Header)
	if format.FormatType() != expfmt.TypeTextPlain {
		whole.ServeHTTP(w, r)
		return
	}
	mfs, gatherErr := m.reg.Gather()
	if gatherErr != nil && len(mfs) == 0 {
		whole.ServeHTTP(w, r) // promhttp reports the error
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 32<<10)
	defer bw.Flush()
	enc := expfmt.NewEncoder(bw, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away; nothing to tell it
		}
	}
	_ = streamFamilies(bw, m.sources())
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}

// Gatherer gathers every metric at once, the per-job ones included (the
// Registry has all but those).
func (m *Metrics) Gatherer() prometheus.Gatherer { return prometheus.Gatherers{m.reg, m.jobReg} }

// sources are the jobSources registered in jobReg, in order.
func (m *Metrics) sources() []jobSource {
	m.sourcesMu.Lock()
	defer m.sourcesMu.Unlock()
	return m.jobSources
}

// addSource registers a jobSource.
func (m *Metrics) addSource(s jobSource) {
	m.sourcesMu.Lock()
	defer m.sourcesMu.Unlock()
	m.jobReg.MustRegister(sourceCollector{s})
	m.jobSources = append(m.jobSources[:len(m.jobSources):len(m.jobSources)], s)
}

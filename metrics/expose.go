package metrics

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
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
// text format, which Prometheus scrapes by default, Handler writes them a
// family at a time and a chunk of jobs at a time (streamFamilies): a
// scrape then holds a few hundred series at once. A scraper that asks for
// protobuf gets the whole gather, as before.

// family is one metric family of a jobSource: its Desc for the registry,
// and its name, help and type for the streamed text.
type family struct {
	name, help string
	typ        dto.MetricType
	desc       *prometheus.Desc
}

func newFamily(name, help string, typ dto.MetricType, labels ...string) *family {
	return &family{name: name, help: help, typ: typ, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// jobSource makes series labelled by job, a family at a time.
type jobSource interface {
	families() []*family
	// scrape takes what one scrape shows (a read of the store, the jobs
	// to render), and returns what sends one family's series of it. It
	// sends f's series in order of job, each family's once.
	scrape() (emit func(f *family, send func(prometheus.Metric)))
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
		emit(f, func(m prometheus.Metric) { ch <- m })
	}
}

// streamChunk is how many series streamFamilies turns into text at once.
const streamChunk = 512

// streamFamilies writes the sources' families in the text format, each
// family's header once, its series streamChunk at a time.
func streamFamilies(w io.Writer, sources []jobSource) error {
	var buf bytes.Buffer
	chunk := make([]*dto.Metric, 0, streamChunk)
	for _, src := range sources {
		emit := src.scrape()
		for _, f := range src.families() {
			first := true
			var err error
			flush := func() {
				if len(chunk) == 0 || err != nil {
					return
				}
				mf := &dto.MetricFamily{Name: &f.name, Type: &f.typ, Metric: chunk}
				if first {
					mf.Help = &f.help
				}
				buf.Reset()
				if _, err = expfmt.MetricFamilyToText(&buf, mf); err != nil {
					return
				}
				out := buf.Bytes()
				if !first { // the "# TYPE" line: the family's header is written
					out = out[bytes.IndexByte(out, '\n')+1:]
				}
				first = false
				_, err = w.Write(out)
				chunk = chunk[:0]
			}
			emit(f, func(m prometheus.Metric) {
				if err != nil {
					return
				}
				d := &dto.Metric{}
				if err = m.Write(d); err != nil {
					return
				}
				if chunk = append(chunk, d); len(chunk) == streamChunk {
					flush()
				}
			})
			flush()
			if err != nil {
				return err
			}
		}
	}
	return nil
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

package metrics

import (
	"cmp"

	"github.com/prometheus/client_golang/prometheus"
)

// Build is what this binary is: its release, the commit it was built from
// ("" when the toolchain did not stamp one) and the Go release that built
// it, as 'baton version' prints them.
type Build struct {
	Version, Revision, GoVersion string
}

// SetBuild exposes b as baton_build_info{version, revision, goversion} = 1,
// so that a fleet's versions are one query away: count by (version,
// revision) (baton_build_info). Call it once.
func (m *Metrics) SetBuild(b Build) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "1, labelled with the baton release this process runs, the commit it was built from (unknown when not stamped) and the Go release that built it.",
		ConstLabels: prometheus.Labels{
			"version": cmp.Or(b.Version, "unknown"), "revision": cmp.Or(b.Revision, "unknown"), "goversion": cmp.Or(b.GoVersion, "unknown"),
		},
	})
	g.Set(1)
	m.reg.MustRegister(g)
}

// SetFeatureLevel exposes a daemon's feature level (scheduler.FeatureLevel:
// the job semantics it implements) as baton_daemon_feature_level. Call it
// once.
func (m *Metrics) SetFeatureLevel(level int) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "daemon_feature_level",
		Help: "The job semantics this daemon implements: it runs the jobs whose definitions need this level or less, and leaves the others to newer daemons.",
	})
	g.Set(float64(level))
	m.reg.MustRegister(g)
}

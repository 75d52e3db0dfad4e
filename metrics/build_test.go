package metrics_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/batonhq/baton/metrics"
)

// A scrape says which baton this is, the daemon's feature level and, from
// the store, the schema version: what a fleet's mixed versions are read
// from.
func TestBuildAndSchemaVersion(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		m := metrics.New()
		m.SetBuild(metrics.Build{Version: "v9.9.9", Revision: "0123456789abcdef", GoVersion: "go1.99"})
		m.SetFeatureLevel(3)
		m.WatchSchedule(e.store)
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		fams := scrape(t, srv.URL)
		expectExactly(t, fams, "baton_build_info", map[string]float64{
			key("goversion", "go1.99", "revision", "0123456789abcdef", "version", "v9.9.9"): 1,
		})
		expectExactly(t, fams, "baton_daemon_feature_level", map[string]float64{"": 3})
		schema, err := e.store.SchemaVersion(context.Background())
		if err != nil || schema < 5 {
			t.Fatalf("schema version %d, %v", schema, err)
		}
		expectExactly(t, fams, "baton_schema_version", map[string]float64{"": float64(schema)})

		// A build without a stamped commit says so.
		m = metrics.New()
		m.SetBuild(metrics.Build{Version: "dev", GoVersion: "go1.99"})
		srv2 := httptest.NewServer(m.Handler())
		defer srv2.Close()
		expectExactly(t, scrape(t, srv2.URL), "baton_build_info", map[string]float64{
			key("goversion", "go1.99", "revision", "unknown", "version", "dev"): 1,
		})
	})
}

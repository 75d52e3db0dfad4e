package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/web"
)

// A job page shows a list-form command as a shell would read it back:
// before, bash -c "pg_dump -Fc mydb > …" read bash -c pg_dump -Fc mydb > …,
// as if the redirection were bash's.
func TestJobPageQuotesCommand(t *testing.T) {
	f := newFixture(t)
	job := baton.Job{Name: "dump", Schedule: "0 2 * * *",
		Command: []string{"bash", "-c", `pg_dump -Fc "$DB" > /backups/it's.dump`, ""}}
	if _, err := f.sched.Publish(context.Background(), []baton.Job{job}, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	base, _ := f.serve(t, web.Config{})
	page := do(t, client(nil), "GET", base+"/jobs/dump", nil, map[string]string{"Accept": "text/html"})
	want := `<code>bash -c &#39;pg_dump -Fc &#34;$DB&#34; &gt; /backups/it&#39;\&#39;&#39;s.dump&#39; &#39;&#39;</code>`
	if page.status != 200 || !strings.Contains(page.body, want) {
		i := strings.Index(page.body, "<dt>Command</dt>")
		t.Errorf("GET /jobs/dump: %d; want the command as %s, got:\n%.300s", page.status, want, page.body[max(i, 0):])
	}
}

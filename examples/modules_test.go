// Package examples holds the test that runs the examples kept in modules
// of their own (so that baton's module does not depend on what they
// adapt, such as gocron): go test ./... at the root does not descend into
// a nested module, and this test does it, so that the README's test
// command covers them.
package examples

import (
	"os"
	"os/exec"
	"testing"
)

// TestNestedModules runs the tests of each nested example module, built
// against this checkout (their go.mod replaces baton with ../..).
func TestNestedModules(t *testing.T) {
	for _, dir := range []string{"gocronlocker"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			// -race, as the README's test command runs the rest.
			cmd := exec.Command("go", "test", "-race", "-count=1", "-timeout", "5m", "./...")
			cmd.Dir = dir
			// -mod=mod: the nested go.sum may lack a line that the
			// replaced baton module's newer requirements need.
			cmd.Env = append(os.Environ(), "GOFLAGS="+os.Getenv("GOFLAGS")+" -mod=mod")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go test ./... in examples/%s: %v\n%s", dir, err, out)
			}
			t.Logf("%s", out)
		})
	}
}

package compat

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkv/idemkv/compat/nodedriver"
)

// runNodeDriver runs testdata/nodedriver.js with the DataStax Node.js
// driver that compat/nodedriver provisions (npm install into the user's
// cache on first use). Without node, npm or the npm registry the test
// skips saying so, unless IDEMKV_REQUIRE_NODE_DRIVER=1 makes it fail.
func runNodeDriver(t *testing.T, r *ring, queries []pyQuery) map[string]pyResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node, dir, err := nodedriver.Ensure(ctx)
	if err != nil {
		if os.Getenv(nodedriver.RequireEnv) == "1" {
			t.Fatalf("%v (%s=1)", err, nodedriver.RequireEnv)
		}
		t.Skipf("%v\n(set %s=1 to fail instead)", err, nodedriver.RequireEnv)
	}
	return runDriverScript(t, r, queries, nodedriver.Version, []string{"NODE_PATH=" + filepath.Join(dir, "node_modules")}, node, "nodedriver.js")
}

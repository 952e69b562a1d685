package infra

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateLogicalIDs = flag.Bool("update-logical-ids", false, "rewrite testdata/logical-ids.txt from the template")

// A logical ID that leaves the template makes CloudFormation delete its
// resource on the next deploy and create another under the new ID: the
// NodeClaim table, the queues and their messages, the webhook secret (and
// with it the registered URL). testdata/logical-ids.txt holds the full
// stack's IDs; resources may be added, but an ID that goes (a renamed
// construct, one nested a level deeper) fails until the list is rewritten
// on purpose: go test ./infra -run LogicalIDs -update-logical-ids.
func TestLogicalIDsAreKept(t *testing.T) {
	_, _, j := full(t)
	var ids []string
	for id := range j["Resources"].(map[string]interface{}) {
		ids = append(ids, id)
	}
	for id := range j["Outputs"].(map[string]interface{}) {
		ids = append(ids, "Outputs."+id)
	}
	slices.Sort(ids)
	path := filepath.Join("testdata", "logical-ids.txt")
	if *updateLogicalIDs {
		if err := os.WriteFile(path, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(b)) {
		if _, found := slices.BinarySearch(ids, id); !found {
			t.Errorf("logical ID %s is gone: CloudFormation would replace that resource on every deployed stack", id)
		}
	}
}

package store_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/store"
)

// Decisions come back by time window, oldest first, with their kind, id
// and body; expired ones are gone.
func TestDecisionsByWindow(t *testing.T) {
	e := newEnv(t)
	st := e.store(t)
	t0 := e.clock.Now()
	for i, d := range []store.Decision{
		{At: t0.Add(-2 * time.Hour), Kind: "launch", ID: "run-1", Body: []byte(`{"n":1}`)},
		{At: t0.Add(-30 * time.Minute), Kind: "fleet", ID: "disruption", Body: []byte(`{"n":2}`)},
		{At: t0.Add(-10 * time.Minute), Kind: "launch", ID: "run-2#x", Body: []byte(`{"n":3}`)},
	} {
		if err := st.PutDecision(e.ctx, d); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	got, err := st.ListDecisions(e.ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "fleet" || got[0].ID != "disruption" || string(got[0].Body) != `{"n":2}` ||
		got[1].ID != "run-2#x" || !got[1].At.Equal(t0.Add(-10*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("window: %+v", got)
	}
	e.clock.Advance(store.DecisionTTL - 20*time.Minute)
	if got, err := st.ListDecisions(e.ctx, t0.Add(-3*time.Hour)); err != nil || len(got) != 1 {
		t.Fatalf("after the TTL only the newest is left, got %d (%v)", len(got), err)
	}
	if err := st.PutDecision(e.ctx, store.Decision{Kind: "launch"}); err == nil {
		t.Error("a decision without a time was accepted")
	}
}

// A record larger than DynamoDB's 400 KB item limit, even gzipped, is
// stored in parts and read back whole (before parts, dynalite refused it as
// DynamoDB does); a record missing a part is left out, not returned cut.
func TestLargeDecisionStoredInParts(t *testing.T) {
	e := newEnv(t)
	st := e.store(t, store.WithPageSize(1)) // parts split across pages too
	t0 := e.clock.Now()
	big := make([]byte, 900<<10) // random: gzip cannot shrink it
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if err := st.PutDecision(e.ctx, store.Decision{At: t0, Kind: "fleet", ID: "disruption", Body: big}); err != nil {
		t.Fatalf("put a 900 KiB record: %v", err)
	}
	if err := st.PutDecision(e.ctx, store.Decision{At: t0.Add(time.Millisecond), Kind: "launch", ID: "p", Body: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListDecisions(e.ctx, t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0].Body, big) || got[0].ID != "disruption" || string(got[1].Body) != `{"n":1}` {
		t.Fatalf("got %d records (first %d bytes), want the large one whole and the small one", len(got), len(got[0].Body))
	}

	// A record with a part gone: nothing of it is listed, rather than a
	// body cut short.
	out, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: sdkaws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if sk, ok := it["sk"].(*types.AttributeValueMemberS); ok && strings.HasSuffix(sk.Value, "#fleet#disruption~p001") {
			if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: sdkaws.String(e.table), Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": sk}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err = st.ListDecisions(e.ctx, t0.Add(-time.Minute))
	if err != nil || len(got) != 1 || got[0].Kind != "launch" {
		t.Fatalf("with a part missing: %d records (%v), want only the small one", len(got), err)
	}
}

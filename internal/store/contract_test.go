package store_test

import (
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// The DynamoDB store keeps the contract the controllers' in-memory fake
// (storetest.Store) is held to, so a unit test over the fake tells the
// truth about the store. Each case gets a fresh dynalite table.
func TestContract(t *testing.T) {
	storetest.RunContract(t, func(t *testing.T, now func() time.Time) storetest.Repository {
		return newEnv(t).store(t, store.WithClock(now))
	})
}

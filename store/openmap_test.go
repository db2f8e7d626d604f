package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Open maps the file defaultInitialMap ahead (SPEC-NOTES "The file mapped
// ahead"), and where the system refuses that much address space (ENOMEM,
// as under ulimit -v) it opens the store all the same, mapped as it grows;
// any other failure is Open's.
func TestOpenMapFallback(t *testing.T) {
	t.Cleanup(func() { boltOpen = bolt.Open })
	var asked []int
	boltOpen = func(path string, mode os.FileMode, o *bolt.Options) (*bolt.DB, error) {
		asked = append(asked, o.InitialMmapSize)
		if o.InitialMmapSize > 0 {
			return nil, syscall.ENOMEM
		}
		return bolt.Open(path, mode, o)
	}
	s, err := Open(filepath.Join(t.TempDir(), "waisteer.db"))
	if err != nil {
		t.Fatalf("Open where the map ahead is refused: %v", err)
	}
	s.Close()
	if defaultInitialMap > 0 && (len(asked) != 2 || asked[0] != defaultInitialMap || asked[1] != 0) {
		t.Fatalf("maps asked: %v, want %d then 0", asked, defaultInitialMap)
	}

	asked = nil
	refused := errors.New("refused for another reason")
	boltOpen = func(path string, mode os.FileMode, o *bolt.Options) (*bolt.DB, error) {
		asked = append(asked, o.InitialMmapSize)
		return nil, refused
	}
	if _, err := Open(filepath.Join(t.TempDir(), "waisteer.db")); !errors.Is(err, refused) || len(asked) != 1 {
		t.Fatalf("Open on another failure: %v after %d tries, want that failure after one", err, len(asked))
	}
}

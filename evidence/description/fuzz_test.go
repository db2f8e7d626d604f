package description

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
)

// FuzzRead: no description, TOML or JSON, makes Read panic (it is outside
// bytes), and a record it accepts passes the reader's rules (COMPANION §5):
// signed, it reads back to the same record. Seeds: the sample description,
// one in JSON, and mistakes.
func FuzzRead(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "..", "cmd", "waisteer", "testdata", "record", "example.toml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example, true)
	f.Add([]byte(`{"room": "`+string(make([]byte, 0))+`aa00000000000000000000000000000000000000000000000000000000000055", "start": 0, "end": 10, "class": "Estimator", "joules": "1.5mJ", "tracks": [{"kind": "media", "direction": "out", "bytes": "18446744073709551615"}], "subscriber_us": {"3": 7}}`), false)
	f.Add([]byte(`{"room": 1}`), false)
	f.Add([]byte("start = 1979-05-27T07:32:00.9999999Z\n"), true)
	f.Add([]byte(`{"joules": 1e3}`), false)
	key := sig.NewPrivateKey([32]byte{3})
	f.Fuzz(func(t *testing.T, data []byte, isTOML bool) {
		r, err := Read("d", data, isTOML, key.Public())
		if err != nil {
			return
		}
		if r.Hop != key.Public() {
			t.Fatalf("the record's hop is %s, not the key's", r.Hop)
		}
		back, err := evidence.ParseRecord(evidence.SignRecord(r, key))
		if err != nil {
			t.Fatalf("Read accepted a record the reader refuses: %v", err)
		}
		back.Sig = r.Sig
		if len(back.Tracks) == 0 && len(r.Tracks) == 0 {
			back.Tracks = r.Tracks
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("signed and read back:\n%+v\nwas\n%+v", back, r)
		}
	})
}

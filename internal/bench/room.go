package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// The room of a run.

// benchRoom is the room a run steers: n pathways of an edge and an interior
// hop each, of two classes; the first pathway has a capacity, the last a
// share (§6.3); the policy is internal/scenario's (P = 60 s, W = 5 P,
// L = 10 s).
type benchRoom struct {
	sc      *scenario.Scenario
	path    string // the path of server_uri
	ids     []string
	initial int
	hops    [][2]int // pathway, hop
}

func newBenchRoom(n, players int) (*benchRoom, error) {
	pws := make([]scenario.Pathway, n)
	for i := range pws {
		class := evidence.ModelBased
		if i%4 == 1 {
			class = evidence.OnChipCounter
		}
		pws[i] = scenario.Pathway{
			ID: fmt.Sprintf("p%02d", i), TopTier: 2, LatencyMs: uint32(60 + 10*(i%8)), Capacity: policy.Unlimited,
			Hops: []scenario.Hop{
				{Place: policy.Edge, Class: class, Joules: uint64(20_000_000 + 700_000*((i*7)%n)), Bytes: 1_000_000_000,
					SubscriberUs: [8]uint64{0, 0, 60_000_000, 0, 0, 0, 0, 0}},
				{Place: policy.Interior, Class: class, Joules: 5_000_000, Bytes: 900_000_000},
			},
		}
	}
	pws[0].Capacity = uint32(max(players/4, 1))
	pws[n-1].MinSharePPM = 100_000
	sc, err := scenario.Build(scenario.Spec{Name: fmt.Sprintf("bench %d", n), Pathways: pws})
	if err != nil {
		return nil, err
	}
	r := &benchRoom{sc: sc, ids: sc.Policy.IDs(), initial: int(sc.Policy.Initial)}
	r.path = sc.Policy.ServerURI
	if k := strings.Index(r.path, "://"); k >= 0 {
		rest := r.path[k+3:]
		r.path = rest[max(strings.IndexByte(rest, '/'), 0):]
	}
	for i := range pws {
		for j := range pws[i].Hops {
			r.hops = append(r.hops, [2]int{i, j})
		}
	}
	return r, nil
}

// record is hop h's signed record of [start, start + P).
func (r *benchRoom) record(h int, start uint64, edit func(*evidence.Record)) []byte {
	i, j := r.hops[h][0], r.hops[h][1]
	rec := r.sc.Record(i, j, start, start+r.sc.Policy.PeriodUs)
	if edit != nil {
		edit(rec)
	}
	return evidence.SignRecord(rec, r.sc.HopKeys[i][j])
}

// periods are the records of every hop for the periods [from, to).
func (r *benchRoom) periods(from, to uint64) []byte {
	var body []byte
	for s := from; s < to; s += r.sc.Policy.PeriodUs {
		for h := range r.hops {
			body = append(body, r.record(h, s, nil)...)
		}
	}
	return body
}

func (r *benchRoom) recordsPath() string {
	return "/v1/rooms/" + r.sc.Room.ID().String() + "/records"
}

// writeFiles writes the room's files and a configuration for serve into dir,
// on a bbolt store in dir/data.
func (r *benchRoom) writeFiles(dir, engine string) (string, error) {
	return r.writeFilesOn(dir, engine, "")
}

// writeFilesOn is writeFiles on the PostgreSQL store whose DSN is in the
// environment variable dsnEnv, or on bbolt when dsnEnv is "". Every
// server of a room on PostgreSQL reads the same files (issue 15).
func (r *benchRoom) writeFilesOn(dir, engine, dsnEnv string) (string, error) {
	dataDir, store := "data_dir = \"data\"\n", ""
	if dsnEnv != "" {
		dataDir, store = "", "\n[store]\nengine = \"postgres\"\ndsn_env = \""+dsnEnv+"\"\n"
	}
	files := map[string][]byte{
		"room.cbor":   r.sc.Room.DescriptorBytes,
		"keylog.cbor": r.sc.Room.HeadBytes,
		"policy.wsp1": r.sc.PolicyBytes,
		"steer.key":   sig.MarshalPrivateKey(r.sc.SteerKey),
		"token":       []byte("bench\n"),
		"serve.toml": []byte(`listen = "127.0.0.1:0"
` + dataDir + `operator_token_file = "token"

[http]
engine = "` + engine + `"

# The bench drives the server at its saturated rate from one address:
# no budgets (issue 26).
[limits]
address_decisions_per_s = 0
address_sessions_per_s = 0
network_decisions_per_s = 0
network_sessions_per_s = 0

[[room]]
descriptor = "room.cbor"
keylog = "keylog.cbor"
policy = "policy.wsp1"
steering_key = "steer.key"
` + store),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "serve.toml"), nil
}

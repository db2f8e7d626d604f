package roomsteer

import (
	"net/http"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/store"
)

// ServeRecords takes a hop's records (POST /v1/rooms/{room}/records): one
// or more WMH1 records back to back, each read (COMPANION §5: §1's codes,
// energy_invalid, record_invalid), checked for the room (wrong_room) and
// its hop's signature (bad_key, bad_signature), and its hop's authority
// under the room's current key log (COMPANION §4.2: hop_not_authorised,
// hop_revoked). The accepted ones are stored, idempotently by digest, in
// one durable write before any is answered; a refused one is never stored.
// Each is answered in order: 200 when every record was accepted (or held
// already), 422 otherwise.
// MaxRecordsBody bounds a hop's POST: about 17 000 records of no tracks.
const MaxRecordsBody = 4 << 20

func (h *Room) ServeRecords(w http.ResponseWriter, r *http.Request) {
	aerr := web.OctetStream(r)
	var body []byte
	if aerr == nil {
		body, aerr = web.ReadBody(w, r, MaxRecordsBody)
	}
	if aerr == nil && len(body) == 0 {
		aerr = api.Errorf(api.EmptyBody, "the body holds no record")
	}
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	st := h.state.Load()
	checked := h.d.Records.Check()
	defer checked()
	raws, splitErr := evidence.SplitRecords(body)
	results := make([]api.RecordResult, 0, len(raws)+1)
	var toStore []store.Record
	var entries []evidence.Entry
	where := map[sig.Hash]int{} // digest → index of its result, for duplicates in one body
	refused := 0
	for i, raw := range raws {
		rec, err := st.room.ReadRecord(raw)
		if err != nil {
			results = append(results, h.refuseRecord(i, err))
			refused++
			continue
		}
		digest := rec.Digest()
		if _, dup := where[digest]; dup {
			results = append(results, api.RecordResult{Index: i, Digest: digest.String(), Outcome: "duplicate"})
			continue
		}
		where[digest] = len(results)
		res := api.RecordResult{Index: i, Digest: digest.String()}
		if pw, ok := st.pathwayOf(rec.Hop); ok {
			res.Pathway = st.ids[pw]
		} else {
			// Stored all the same: a later policy may name the hop.
			res.Warning = api.HopNotInPolicy
			res.Detail = "the hop " + rec.Hop.String() + " is in no pathway of the room's active policy " +
				st.digest.String() + ", so no decision reads this record until a policy names it"
		}
		results = append(results, res)
		toStore = append(toStore, store.Record{Digest: digest, Room: h.id, Hop: rec.Hop, Start: rec.Start, End: rec.End, Raw: raw})
		entries = append(entries, evidence.Entry{Digest: digest, Record: rec})
	}
	if splitErr != nil {
		// The bytes after the last whole record are not one: they are
		// refused as the record they start.
		results = append(results, h.refuseRecord(len(raws), splitErr))
		refused++
	}
	if len(toStore) > 0 {
		// With the records of the POSTs that arrive meanwhile, in one
		// durable write (recordCommitter).
		added, err := h.d.Records.Put(r.Context(), toStore, checked)
		if err != nil {
			// Nothing is answered as accepted that is not durable: the
			// hop sends the body again, and what was stored is then a
			// duplicate.
			w.Header().Set("Retry-After", "1")
			web.Refuse(w, h.d.Fails.Failed("the records could not be stored", err))
			return
		}
		for k, sr := range toStore {
			res := &results[where[sr.Digest]]
			if added[k] {
				res.Outcome = "accepted"
				h.accepted.Add(1)
				if res.Warning == api.HopNotInPolicy {
					h.offPolicy.Add(1)
				}
			} else {
				res.Outcome = "duplicate"
				h.duplicates.Add(1)
			}
		}
		// §5: a record in the current window updates the evidence at once.
		h.addRecords(entries)
	}
	status := http.StatusOK
	if refused > 0 {
		status = http.StatusUnprocessableEntity
	}
	api.WriteJSON(w, status, api.RecordsAnswer{Results: results})
}

// refuseRecord counts and logs a refused record and returns its answer.
func (h *Room) refuseRecord(i int, err error) api.RecordResult {
	e := api.From(err)
	h.refused.Add(string(e.Code))
	h.d.Log.Info("record refused", "room", h.id.String(), "index", i, "code", string(e.Code), "detail", e.Detail)
	return api.RecordResult{Index: i, Refused: e.Code, Detail: e.Detail}
}

package serve

import (
	"slices"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/web"
)

// frontRooms checks the room of each front playlist against the rooms the
// configuration steers, by id or by name, exactly, as every route finds a
// room (issue 29; web.RoomOf): a playlist of a room the server does not
// steer would fail the start without its line.
func (r *serveReader) frontRooms(f *serveFile, cfg *Config) {
	if f.Front == nil {
		return
	}
	var rooms []web.RoomName
	var names []string
	for _, rc := range cfg.Server.Rooms {
		d, err := room.ParseDescriptor(rc.Descriptor)
		if err != nil {
			continue // room[i] says why
		}
		rooms = append(rooms, web.RoomName{ID: d.ID(), Name: d.Name})
		names = append(names, strconv.Quote(d.Name))
	}
	for i, p := range f.Front.Playlists {
		if p.Room == nil || p.Pool != nil {
			continue
		}
		k := "front.playlists[" + strconv.Itoa(i) + "].room"
		id, aerr := web.RoomOf(*p.Room, rooms)
		if aerr == nil && !slices.ContainsFunc(rooms, func(rn web.RoomName) bool { return rn.ID == id }) {
			aerr = api.Errorf(api.RoomNotFound, "no room has the id %s", id)
		}
		if aerr != nil {
			switch {
			case aerr.Code == api.RoomAmbiguous:
				r.Errorf(k, "%s (room_not_identified)", aerr.Detail)
			case len(names) == 0:
				r.Errorf(k, "no [[room]] is configured, so no room is named %q or has it as its id (room_not_found)", *p.Room)
			default:
				r.Errorf(k, "no room is named %q or has it as its id (room_not_found); the rooms configured are %s", *p.Room, strings.Join(names, ", "))
			}
		}
	}
}

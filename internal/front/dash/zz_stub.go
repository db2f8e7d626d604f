// TEMPORARY STUB, replaced by the h-playlists branch.
package dash

func IsMPD(b []byte) bool                                       { panic("stub") }
func SetSteering(dst, b []byte, element string) ([]byte, error) { panic("stub") }

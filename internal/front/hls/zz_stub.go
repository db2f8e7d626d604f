// TEMPORARY STUB, replaced by the h-playlists branch.
package hls

type Kind int

const (
	NotPlaylist Kind = iota
	Multivariant
	Media
)

func Classify(b []byte) (Kind, error)                                             { panic("stub") }
func SetSteering(dst, b []byte, tag string) ([]byte, error)                       { panic("stub") }
func WithBackups(dst, b []byte, backup func(uri string) []string) ([]byte, error) { panic("stub") }

type Variant struct{ URI, PathwayID, StableID string }

func Variants(b []byte) ([]Variant, error) { panic("stub") }

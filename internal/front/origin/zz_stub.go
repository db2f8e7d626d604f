// TEMPORARY STUB, replaced by the h-origin branch.
package origin

import (
	"context"
	"net/http"
	"time"
)

type Origin struct{}
type Options struct {
	Timeout  time.Duration
	MaxBytes int64
	Client   *http.Client
}

func New(base string, o Options) (*Origin, error) { panic("stub") }

type Request struct {
	Path            string
	RawQuery        string
	IfNoneMatch     string
	IfModifiedSince string
	Header          http.Header
}
type Response struct {
	Status      int
	Body        []byte
	ContentType string
	Header      http.Header
}
type Error struct {
	Status       int
	Code, Detail string
}

func (e *Error) Error() string                                             { return e.Detail }
func (o *Origin) Fetch(ctx context.Context, r *Request) (*Response, error) { panic("stub") }

// Package client is the one HTTP client of the steering server's routes: an
// auditor's fetch of a decision by its URL and of everything §9.1 needs to
// verify it (§8.4), a player's steering request, and a hop's POST of
// records. A refusal the server answers with comes back as its own
// *api.Error, so that a caller reports the server's reason, not a status
// line.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/waisteer/waisteer/internal/api"
)

// Client makes the requests.
type Client struct {
	HTTP      *http.Client
	UserAgent string
}

// Workers is how many fetches FetchInput makes at once.
const Workers = 8

// New returns a client with bounded waits at each stage and a few
// connections to one server.
func New() *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 15 * time.Second
	t.MaxIdleConnsPerHost = Workers
	return &Client{HTTP: &http.Client{Transport: t, Timeout: 30 * time.Second}, UserAgent: "waisteer"}
}

// Do sends a request, with body as application/octet-stream when it is not
// nil, and returns the answer's body, at most limit bytes. An answer whose
// status is not among ok is an error: the server's *api.Error when its body
// is one (api.Read), else an *api.Error of its status.
func (c *Client) Do(ctx context.Context, method, target string, body []byte, limit int64, ok ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, target, err)
	}
	if !slices.Contains(ok, resp.StatusCode) {
		return nil, &Failure{Method: method, URL: target, Err: api.Read(resp.StatusCode, resp.Header.Get("Content-Type"), b)}
	}
	if int64(len(b)) > limit {
		return nil, &Failure{Method: method, URL: target, Err: &api.Error{Code: TooLarge,
			Detail: fmt.Sprintf("the answer is more than %d bytes", limit), Status: resp.StatusCode}}
	}
	return b, nil
}

// TooLarge is the code of an answer longer than the caller's limit: a bound
// above the largest the text lets the thing be (api.MaxRecordBytes...).
const TooLarge api.Code = "answer_too_large"

// Get fetches target, which must answer 200.
func (c *Client) Get(ctx context.Context, target string, limit int64) ([]byte, error) {
	return c.Do(ctx, http.MethodGet, target, nil, limit, http.StatusOK)
}

// MaxJSONBytes bounds a JSON answer GetJSON reads.
const MaxJSONBytes = 1 << 20

// GetJSON fetches target, which must answer 200 with one JSON value that
// decodes into v with no field v does not name.
func (c *Client) GetJSON(ctx context.Context, target string, v any) error {
	b, err := c.Get(ctx, target, MaxJSONBytes)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("GET %s: the answer is not the JSON expected: %v", target, err)
	}
	if d.More() {
		return fmt.Errorf("GET %s: the answer has more after its JSON value", target)
	}
	return nil
}

// A Failure is a request the server refused: its *api.Error, and the
// request it answered.
type Failure struct {
	Method, URL string
	Err         *api.Error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s %s: %d %v", f.Method, f.URL, f.Err.Status, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Manifest is a steering manifest as a client reads it (§8.1).
type Manifest struct {
	Raw      []byte
	Reload   string   // RELOAD-URI
	Priority []string // PATHWAY-PRIORITY
	Decision string   // science.transaction.wai-decision: the decision's URL (§8.4)
}

// Steer makes a steering request and reads its manifest.
func (c *Client) Steer(ctx context.Context, target string) (*Manifest, error) {
	b, err := c.Get(ctx, target, 1<<20)
	if err != nil {
		return nil, err
	}
	return ReadManifest(b)
}

// ReadManifest reads the members of a steering manifest a client follows.
func ReadManifest(b []byte) (*Manifest, error) {
	var m struct {
		Reload   string   `json:"RELOAD-URI"`
		Priority []string `json:"PATHWAY-PRIORITY"`
		Decision string   `json:"science.transaction.wai-decision"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("the steering manifest %q does not read: %v", b, err)
	}
	if m.Reload == "" || len(m.Priority) == 0 || m.Decision == "" {
		return nil, fmt.Errorf("the steering manifest %q lacks a member of §8.1", b)
	}
	return &Manifest{Raw: b, Reload: m.Reload, Priority: m.Priority, Decision: m.Decision}, nil
}

// PostRecords posts per-hop records back to back to a room's records route
// and returns the server's result for each (api.RecordsAnswer); an answer
// that refuses some records (422) is returned too, with an error naming the
// first.
func (c *Client) PostRecords(ctx context.Context, target string, body []byte) (*api.RecordsAnswer, error) {
	b, err := c.Do(ctx, http.MethodPost, target, body, 16<<20, http.StatusOK, http.StatusUnprocessableEntity)
	if err != nil {
		return nil, err
	}
	var a api.RecordsAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("POST %s: the answer %q does not read: %v", target, b, err)
	}
	for _, r := range a.Results {
		if r.Refused != "" {
			return &a, fmt.Errorf("record %d refused: %s: %s", r.Index, r.Refused, r.Detail)
		}
	}
	return &a, nil
}

// ErrorOf is the server's refusal in err, or nil.
func ErrorOf(err error) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

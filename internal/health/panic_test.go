package health

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
)

// expectedPanics counts the panics this package's tests cause on purpose;
// TestMain fails the run on any other a checker recovered (issue 26).
var expectedPanics atomic.Uint64

// TestCheckPanicGoesOn (issue 26, "a panic in any background loop is a
// test failure, never a silent exit"): a panic in a check, here in the
// caller's OnCheck on the first two, is recovered, logged at ERROR with
// its stack and counted under "health"; the target goes on being checked
// on its grid.
func TestCheckPanicGoesOn(t *testing.T) {
	url, _ := scripted(t)
	var logs syncBuf
	before := guard.Counts()["health"]
	var calls atomic.Int64
	fourth := make(chan struct{})
	expectedPanics.Add(2)
	c, err := New(Settings{Every: 50 * time.Millisecond, Timeout: 40 * time.Millisecond, DownAfter: 1}, []Target{{"edge", url}}, Options{
		OnCheck: func(string, Outcome, time.Duration) {
			switch calls.Add(1) {
			case 1, 2:
				panic("the caller's bug")
			case 4:
				close(fourth)
			}
		},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Start(t.Context())
	defer c.Stop()
	select {
	case <-fourth:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d checks in 5 s after two panics", calls.Load())
	}
	if got := guard.Counts()["health"] - before; got != 2 {
		t.Errorf("%d panics counted under health, want 2", got)
	}
	if l := logs.String(); strings.Count(l, "level=ERROR") != 2 || !strings.Contains(l, "loop=health") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("the log:\n%s", l)
	}
}

// syncBuf is a log the checker's goroutines write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

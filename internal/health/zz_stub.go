// TEMPORARY STUB, replaced by the h-health branch.
package health

import (
	"context"
	"log/slog"
	"time"
)

type Settings struct {
	Every, Timeout time.Duration
	DownAfter      int
}
type Target struct{ Name, URL string }
type Status struct {
	Up        bool
	Failures  int
	Checks    uint64
	LastCheck time.Time
	LastError string
	LastMs    float64
	Since     time.Time
}
type Outcome string
type Change struct {
	Name   string
	Up     bool
	Status Status
}
type Options struct {
	OnChange func(Change)
	OnCheck  func(name string, o Outcome, d time.Duration)
	Now      func() time.Time
	Logger   *slog.Logger
}
type Checker struct{}

func New(s Settings, targets []Target, o Options) (*Checker, error) { panic("stub") }
func (c *Checker) Start(ctx context.Context)                        { panic("stub") }
func (c *Checker) Stop()                                            { panic("stub") }
func (c *Checker) Status(name string) (Status, bool)                { panic("stub") }
func (c *Checker) Update(s Settings, targets []Target) error        { panic("stub") }

package server

import (
	"github.com/waisteer/waisteer/store"
)

// storeUp says whether the store answers, and how many outages it has
// had: a shared store's own account (store.Health), or else whether the
// last group commit was durable, and how many times group commits began
// failing.
func (s *Server) storeUp() (bool, uint64) {
	if h, ok := s.st.(store.Health); ok {
		return h.Up(), h.Outages()
	}
	return !s.commits.Failing(), s.commits.Outages()
}

// storeReachable is storeUp's first answer.
func (s *Server) storeReachable() bool {
	up, _ := s.storeUp()
	return up
}

package server

import "github.com/waisteer/waisteer/internal/audit"

// immutable is the Cache-Control the audit serves bytes named by their
// digest with (internal/audit).
const immutable = audit.Immutable

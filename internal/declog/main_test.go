package declog_test

import (
	"testing"

	"github.com/waisteer/waisteer/internal/fuzzing"
)

// TestMain turns off the fuzzing engine's minimization unless asked for
// (fuzzing.SignedInputs): FuzzPeek's inputs are signed notes, and the
// proofs' seeds are kilobytes of JSON, whose minimization otherwise holds
// the workers for the whole run (0 execs a second after the first few).
func TestMain(m *testing.M) { fuzzing.Main(m) }

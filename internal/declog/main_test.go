package declog_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/waisteer/waisteer/internal/fuzzing"
)

// TestMain turns off the fuzzing engine's minimization unless asked for
// (fuzzing.SignedInputs): FuzzPeek's inputs are signed notes, and the
// proofs' seeds are kilobytes of JSON, whose minimization otherwise holds
// the workers for the whole run (0 execs a second after the first few).
func TestMain(m *testing.M) {
	flag.Parse()
	if err := fuzzing.SignedInputs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// Package fuzzing sets the fuzzing engine's defaults for the test binaries
// whose fuzz targets take signed inputs.
package fuzzing

import (
	"flag"
	"fmt"
	"os"
)

// minimizeFlag is the testing package's -fuzzminimizetime.
const minimizeFlag = "test.fuzzminimizetime"

// SignedInputs turns off the engine's minimization of the inputs it finds
// unless -fuzzminimizetime was given; TestMain calls it after flag.Parse.
//
// A signed input hardly loses a byte without losing what made it
// interesting, and the minimizer tries every span of every argument, a
// number of tries that grows with the square of its length
// (golang/go#48820): one input of a kilobyte holds a worker for the minute
// the engine allows by default, and two of them stop the fuzzing. The
// inputs found are kept as they were found, and a failing input is still
// written to testdata/fuzz.
func SignedInputs() error {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == minimizeFlag })
	if given {
		return nil
	}
	return flag.Set(minimizeFlag, "0")
}

// Main is a TestMain that parses the flags, calls SignedInputs and runs
// the tests, for a test binary that needs nothing else before them.
func Main(m interface{ Run() int }) {
	flag.Parse()
	if err := SignedInputs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

package oam_test

import (
	"os"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// segchainBin is the segchain binary (the agents' test runs the CLI and
// real agents with it).
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

package pools

import (
	"os"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

var bin string // the segchain binary (agents)

func TestMain(m *testing.M) { os.Exit(testutil.MainWithBinary(m, &bin)) }

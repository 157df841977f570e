package daemon

import (
	"runtime"
	"sync"
	"testing"
)

// A group's first BGP speaker raises GOMAXPROCS to the number of nodes it
// serves, once; never lowers it; leaves it alone when the environment
// sets it.
func TestSpeakerProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	for _, c := range []struct {
		name        string
		env         string
		start, n    int
		want, want2 int // after the first call, after a second one for 3n
	}{
		{"raised to the nodes served", "", 2, 25, 25, 25},
		{"never lowered", "", 8, 4, 8, 8},
		{"GOMAXPROCS set", "2", 2, 25, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", c.env)
			runtime.GOMAXPROCS(c.start)
			once := &sync.Once{}
			speakerProcs(once, c.n, nil)()
			if got := runtime.GOMAXPROCS(0); got != c.want {
				t.Fatalf("GOMAXPROCS %d, want %d", got, c.want)
			}
			speakerProcs(once, 3*c.n, nil)() // the same once: no second raise
			if got := runtime.GOMAXPROCS(0); got != c.want2 {
				t.Fatalf("after a second call: GOMAXPROCS %d, want %d", got, c.want2)
			}
		})
	}
}

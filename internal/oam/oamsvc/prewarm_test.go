package oamsvc

import (
	"sync"
	"testing"

	"google.golang.org/grpc"
)

// The nodes of one process (an agent group) load the tap once between
// them, not once each.
func TestPrewarmOncePerProcess(t *testing.T) {
	prewarmOnce = sync.Once{}
	prewarms.Store(0)
	called := make(chan struct{}, 32)
	prewarm = func() error { called <- struct{}{}; return nil }
	var wg sync.WaitGroup
	for i := 0; i < 25; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Register(grpc.NewServer(), "n", "")
		}()
	}
	wg.Wait()
	<-called
	if n := prewarms.Load(); n != 1 {
		t.Fatalf("25 nodes registered: the tap loaded %d times, want once", n)
	}
}

package dump

import (
	"context"
	"errors"
	"io"
	"testing"
)

// OpenFiltered compiles the filter for the file's link type: "" keeps
// every frame, an expression that matches none keeps none, a malformed
// one is an error.
func TestOpenFiltered(t *testing.T) {
	path := goldenCapture(t).pcap()
	count := func(expr string) (int, error) {
		src, err := OpenFiltered(path, expr)
		if err != nil {
			return 0, err
		}
		defer src.Close()
		n := 0
		for {
			_, _, err := src.Next(context.Background())
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n++
		}
	}
	all, err := count("")
	if err != nil || all == 0 {
		t.Fatalf(`OpenFiltered(""): %d frames, %v; want some`, all, err)
	}
	if n, err := count("ether host 02:de:ad:be:ef:99"); err != nil || n != 0 {
		t.Errorf("a filter matching nothing: %d frames, %v; want 0", n, err)
	}
	if _, err := count("port ((("); err == nil {
		t.Error("a malformed filter: no error")
	}
}

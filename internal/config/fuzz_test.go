package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any input either loads or fails with an ErrorList whose
// entries all carry a message; nothing panics. Seeded with every example
// and every bad file.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/*.yaml")
	bad, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, s := range append(seeds, bad...) {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, "testdata/bad")
		if err == nil {
			if d == nil {
				t.Fatal("nil domain without error")
			}
			if _, err := d.SIDs(); err != nil {
				t.Fatalf("valid domain but SIDs fail: %v", err)
			}
			d.Interfaces()
			return
		}
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error %T is not a non-empty ErrorList: %v", err, err)
		}
		for _, e := range list {
			if e.Msg == "" {
				t.Fatalf("empty message at %q", e.Path)
			}
		}
	})
}

package oam

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"sort"
)

var errDeadline = os.ErrDeadlineExceeded

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func binarySize(v any) int { return binary.Size(v) }

func decode(b []byte, v any) {
	_ = binary.Read(bytes.NewReader(b), binary.LittleEndian, v)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

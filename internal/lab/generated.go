package lab

import (
	"fmt"
	"os"
)

// WriteGenerated generates the domain of a `lab up --generate` spec
// (ParseGenerate) and writes it where the lab keeps it (GeneratedPath), so
// that apply --lab NAME finds it and lab down removes it. It returns the
// file's path.
func WriteGenerated(spec, labName string) (string, error) {
	f, err := ParseGenerate(spec)
	if err != nil {
		return "", err
	}
	y, err := f.YAML()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return "", err
	}
	p := GeneratedPath(labName)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		return "", fmt.Errorf("lab up --generate: %w", err)
	}
	return p, nil
}

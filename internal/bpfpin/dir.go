package bpfpin

import "path/filepath"

// Dir is where program pins its objects for the namespace named name (as
// Namespace returns it): Root()/<name>/<program>. Packages build their pin
// directories through it, never from Root.
func Dir(name, program string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, name, program), nil
}

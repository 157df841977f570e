package bpfpin

import "path/filepath"

// Dir is where program pins its objects for the namespace named name (as
// Namespace returns it): Root/<name>/<program>. Packages build their pin
// directories through it, never from Root.
func Dir(name, program string) string { return filepath.Join(Root, name, program) }

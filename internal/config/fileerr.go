package config

import (
	"errors"
	"strings"
)

// FileErrors is an ErrorList attributed to the file it was found in: each
// line reads "FILE: PATH (line L:C): MESSAGE", so that an editor or a person
// can go straight to it. errors.As still finds the ErrorList.
type FileErrors struct {
	File string
	List ErrorList
}

func (e *FileErrors) Error() string {
	lines := strings.Split(e.List.Error(), "\n")
	for i, l := range lines {
		lines[i] = e.File + ": " + l
	}
	return strings.Join(lines, "\n")
}

func (e *FileErrors) Unwrap() error { return e.List }

// InFile attributes the errors of a domain file's ErrorList to file; other
// errors are returned as they are.
func InFile(file string, err error) error {
	var list ErrorList
	if errors.As(err, &list) {
		return &FileErrors{File: file, List: list}
	}
	return err
}

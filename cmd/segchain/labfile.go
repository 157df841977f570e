package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/segchain/segchain/internal/lab"
)

// labDomainFile picks the domain file of a verb run with --lab: the file the
// lab was brought up from unless -f names one ("" is the built-in default
// domain). When -f names another file than the lab's, it is used and note
// says so, since the lab's nodes and links may not match it.
func labDomainFile(l *lab.Lab, file string, note io.Writer) string {
	if l == nil {
		return file
	}
	if file == "" {
		return l.File
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = file
	}
	if abs != l.File {
		fmt.Fprintf(note, "segchain: note: lab %s was brought up from %s; using -f %s\n", l.Name, orDefault(l.File), file)
	}
	return file
}

package main

import (
	"fmt"
	"io"
	"os"
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

// labEnv names the environment variable that changes the default lab name
// (lab verbs without --lab, sid/fw --node without --lab): scripts and tests
// can run the documented examples against a lab of their own.
const labEnv = "SEGCHAIN_LAB"

// defaultLab is the lab a verb acts on when --lab is not given.
func defaultLab() string {
	if n := os.Getenv(labEnv); n != "" {
		return n
	}
	return lab.DefaultName
}

package main

import (
	"io"
	"os"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/session"
)

// labDomainFile picks the domain file of a verb run with --lab
// (session.DomainFile: the lab's unless -f names one, noted on note).
func labDomainFile(l *lab.Lab, file string, note io.Writer) string {
	return session.DomainFile(l, file, note)
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

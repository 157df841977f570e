package main

import (
	"errors"
	"fmt"
)

// Exit statuses for automation (plan --detailed-exitcode follows terraform:
// 0 nothing to do, 1 error, 2 changes pending; status --check: 0 in sync,
// 1 error, 2 drift).
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 2
)

// exitStatus is an error that carries the process exit status. A status
// with an empty message is not printed: the verb already said everything.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

// exitCode maps the error Execute returned to the process exit status.
func exitCode(err error) int {
	var es *exitStatus
	if errors.As(err, &es) {
		return es.code
	}
	if err != nil {
		return exitError
	}
	return exitOK
}

// pendingExit is the one place where "something differs from the domain"
// becomes an exit status: plan --detailed-exitcode passes its change count,
// status --check the drift the controller observed (its node → pending
// changes map). With gate off, or nothing pending, it returns nil.
func pendingExit(gate bool, pending int, what string) error {
	if !gate || pending == 0 {
		return nil
	}
	return &exitStatus{code: exitChanges, msg: fmt.Sprintf("%d %s", pending, what)}
}

// Package userspace is the intent half of the `userspace` service kind: a
// SID served by a userspace process through pkg/srv6svc (an SR-aware
// service, or an SR-unaware function behind End.ASM). The domain plans the
// SID; the process binds it; apply waits for the process (internal/dataplane/userspace is
// the node half).
package userspace

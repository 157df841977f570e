// Package journal keeps the undo journal of an apply or destroy on disk,
// one file per node under /run/segchain/journal/<node-id>/, each op
// written and fsync'd before it runs and the file removed when the
// command ends cleanly. A journal left behind is the trace of a command
// that was killed: the next one undoes it (controller.Recover).
package journal

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/lab"
)

// What a newcomer types wrong gets an answer that says what to type
// instead: a mistyped verb its nearest verbs (also when flags follow it),
// a domain verb given a word where it takes flags the flags, a lab that is
// not up the command that brings it up.

// unknownCommand is the error for a word that names no subcommand of
// parent, with the subcommands it is closest to (cobra's SuggestionsFor).
func unknownCommand(parent *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, parent.CommandPath())
	if s := parent.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %q?", strings.Join(s, `" or "`))
	} else {
		msg += fmt.Sprintf(" (%s --help lists them)", parent.CommandPath())
	}
	return errors.New(msg)
}

// subcommandArgs is the Args of a command that only groups subcommands:
// any word left is a subcommand it does not have.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return nil
}

// flagError is the root's FlagErrorFunc (every command inherits it): when
// a group (root, lab, perf …) meets a flag it does not know, the words
// before it name a subcommand that does not exist, which is the error to
// report ("segchain aply --lab X": unknown command "aply", not unknown
// flag --lab).
func flagError(cmd *cobra.Command, err error) error {
	if cmd.HasSubCommands() {
		if args := cmd.Flags().Args(); len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
	}
	return err
}

// suggestSubcommands makes every group of root (root included) that does
// not validate its own arguments reject a word that names no subcommand.
func suggestSubcommands(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && (c.Args == nil || c == root) {
			c.Args = subcommandArgs
			c.SuggestionsMinimumDistance = 2
			if !c.Runnable() {
				// cobra shows a group's help without looking at its
				// arguments; a group that runs checks them first.
				c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// domainArgs is the Args of the domain verbs (plan, apply, destroy,
// status, watch): they take flags only; a word is most likely a domain
// file or a lab.
func domainArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("%s takes no arguments (got %q): name a domain file with -f %s or a lab with --lab %s",
		cmd.CommandPath(), strings.Join(args, " "), args[0], args[0])
}

// getLab is lab.Get with the way out of "no such lab": the command that
// brings it up, and the labs that are up.
func getLab(name string) (*lab.Lab, error) {
	l, err := lab.Get(name)
	if err == nil || !errors.Is(err, lab.ErrNotFound) {
		return l, err
	}
	up := "no lab is up"
	if labs, lerr := lab.List(); lerr == nil && len(labs) > 0 {
		names := make([]string, len(labs))
		for i, l := range labs {
			names[i] = l.Name
		}
		up = "labs up: " + strings.Join(names, ", ")
	}
	return nil, fmt.Errorf("%w: bring it up with segchain lab up --lab %s [-f FILE] (%s)", err, name, up)
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/controller"
)

func newWatchCmd() *cobra.Command {
	var f domainFlags
	cmd := &cobra.Command{
		Use:   "watch [-f FILE] [--lab NAME] [-o json]",
		Short: "Keep the domain applied: re-apply whenever an interface of a node comes up",
		Long: `Applies the domain once, then watches every node's interfaces and applies
again whenever one comes up. Taking an interface down makes the kernel delete
every route through it, and bringing it up does not restore them: an SR-unaware
SF whose link flaps loses its route back to the proxy and the chain is
black-holed until the next apply (status names such chains as broken). watch
does that apply for you, within a fraction of a second of the link coming back.

Each apply prints the interfaces that triggered it (node:interface) and its
changes, like apply; with -o json one JSON object per line:
{"time", "trigger", "result", "error"}. A failing apply is rolled back as
usual and reported; watch goes on. Runs until interrupted (SIGINT/SIGTERM):
it then says so on stderr and exits 0; an apply running at that moment
starts no new change and undoes those it made, as apply does on ^C, and
watch exits 130 (143 for SIGTERM). A second interrupt exits at once.

With --lab, each apply keeps the lab's routers' FRR in step with the domain
(routing: bgp), as apply does. See docs/routing.md.`,
		Example: "  segchain watch --lab default\n  segchain watch -f examples/default.yaml --lab demo -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			// Each apply takes the nodes' locks, leases and preflight
			// like apply's (the session's).
			s, err := f.session(cmd, false)
			if err != nil {
				return err
			}
			defer s.Close()
			// SIGINT/SIGTERM end watch (interrupt.go): an apply running
			// then is rolled back like apply's.
			ctx, intr, stop := onInterrupt(cmd.Context(), cmd.ErrOrStderr(),
				"watch stops (an apply running now starts no new change and undoes those it made)")
			defer stop()
			w := cmd.OutOrStdout()
			var cut *controller.Result // the apply the interrupt cut short
			err = s.Watch(ctx, func(trigger []string, res *controller.Result, err error) {
				if res != nil && res.Interrupted {
					cut = res
				}
				if err == nil && res != nil && !res.Interrupted {
					err = keepOAM(ctx, cmd.ErrOrStderr(), s, false) // chains[].oam (statusoam.go)
				}
				if f.output == "json" {
					ev := struct {
						Time    time.Time          `json:"time"`
						Trigger []string           `json:"trigger,omitempty"`
						Result  *controller.Result `json:"result,omitempty"`
						Error   string             `json:"error,omitempty"`
					}{Time: time.Now().UTC(), Trigger: trigger, Result: res}
					if err != nil {
						ev.Error = err.Error()
					}
					_ = json.NewEncoder(w).Encode(ev) // one object per line
					return
				}
				when := time.Now().UTC().Format(time.TimeOnly)
				if trigger == nil {
					fmt.Fprintf(w, "%s initial apply\n", when)
				} else {
					fmt.Fprintf(w, "%s up: %s\n", when, strings.Join(trigger, " "))
				}
				if res != nil && res.Changes() > 0 {
					printDiffs(w, res.Diffs)
					if res.Applied { // else rolled back: the error says so
						fmt.Fprintf(w, "applied %d change(s)\n", res.Changes())
					}
				} else if err == nil {
					fmt.Fprintln(w, "no changes")
				}
				if err != nil {
					fmt.Fprintln(w, "error:", err)
				}
			})
			if s := intr.signal(); s != nil && err == nil {
				if cut != nil {
					return intr.verdict("watch's apply", cut, controller.ErrInterrupted)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "segchain: watch stopped by %s between applies: nothing was left half-done\n", sigName(s))
				return nil
			}
			return err
		},
	}
	f.register(cmd, true)
	f.registerLock(cmd)
	return cmd
}

package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/dataplane"
)

// version and commit are set at link time (make build:
// -ldflags "-X main.version=... -X main.commit=..."); empty, they come from
// the module and VCS information Go embeds in the binary.
var version, commit string

// versionInfo is what `segchain version` prints.
type versionInfo struct {
	Version  string              `json:"version"`
	Commit   string              `json:"commit"`
	Modified bool                `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string              `json:"go"`
	Kernel   string              `json:"kernel"`
	Features []dataplane.Feature `json:"features,omitempty"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		v.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return v
}

// kernelFeatures runs the kernel feature probe (the one plan and apply use).
func kernelFeatures() ([]dataplane.Feature, error) {
	h, err := dataplane.Open("")
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.Probe().List(), nil
}

func printVersion(w io.Writer, output string, probe bool) error {
	v := buildVersion()
	var perr error
	if probe {
		v.Features, perr = kernelFeatures()
	}
	if output == "json" {
		return writeJSON(w, v)
	}
	mod := ""
	if v.Modified {
		mod = " (modified)"
	}
	fmt.Fprintf(w, "segchain %s\ncommit   %s%s\ngo       %s\nkernel   %s\n", v.Version, v.Commit, mod, v.Go, v.Kernel)
	if perr != nil {
		fmt.Fprintf(w, "kernel features: not probed: %v\n", perr)
	}
	if len(v.Features) > 0 {
		var yes, no []string
		for _, f := range v.Features {
			if f.Supported {
				yes = append(yes, f.Name)
			} else {
				no = append(no, f.Name)
			}
		}
		fmt.Fprintf(w, "kernel features: %s\n", strings.Join(yes, ", "))
		if len(no) > 0 {
			fmt.Fprintf(w, "missing:         %s (segchain version -o json says why)\n", strings.Join(no, ", "))
		}
	}
	return nil
}

func newVersionCmd() *cobra.Command {
	var output string
	var noProbe bool
	cmd := &cobra.Command{
		Use:   "version [-o json] [--no-probe]",
		Short: "Print version, commit, Go and kernel versions and the kernel's optional features",
		Long: `Prints segchain's version and commit, the Go version it was built with, the
running kernel's release and which optional kernel features the feature probe
detected (VRF for End.DT4/End.DT46/vrftable, seg6local counters, flavors,
End.BPF, seg6 HMAC, encap modes) — the same probe plan runs before an apply.
The probe needs root (it tries each feature in a throwaway namespace);
--no-probe skips it. segchain --version prints the same.`,
		Example: "  segchain version\n  segchain version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), output, !noProbe)
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().BoolVar(&noProbe, "no-probe", false, "do not run the kernel feature probe")
	return cmd
}

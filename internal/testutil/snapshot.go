package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var objectIDs = regexp.MustCompile(`\b(prog_id|link_id|id) \d+`)

// KernelSnapshot is the state apply and destroy manage on nodes (name →
// namespace, in the order given): routes and rules of every table
// (protocol numbers, whatever rt_protos names them), HMAC keys, tunsrc,
// TCX attachments (object ids masked), segchain's pins under pinRoot and
// its state files, and any local journal left. key names a namespace's
// pin and state directories (bpfpin.Namespace; passed in: bpfpin's own
// tests use this package). The kill -9 tests compare one after a killed
// command and its successor with a clean one's.
func KernelSnapshot(t testing.TB, nodes []string, netns func(node string) string, key func(netns string) (string, error), pinRoot string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range nodes {
		ns := netns(n)
		fmt.Fprintf(&b, "=== %s\n", n)
		for _, args := range [][]string{
			{"ip", "-N", "-4", "route", "show", "table", "all"}, {"ip", "-N", "-6", "route", "show", "table", "all"},
			{"ip", "-N", "-4", "rule"}, {"ip", "-N", "-6", "rule"}, {"ip", "sr", "hmac", "show"}, {"ip", "sr", "tunsrc", "show"},
			{"bpftool", "net", "show"},
		} {
			out, _ := ExecErr(ns, args...)
			b.WriteString(objectIDs.ReplaceAllString(out, "$1 N"))
		}
		name, err := key(ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{filepath.Join(pinRoot, name), filepath.Join("/run/segchain/fw", name),
			filepath.Join("/run/segchain/journal", name), filepath.Join("/run/segchain/nodes", ns+".json")} {
			_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil {
					fmt.Fprintf(&b, "%s %v\n", strings.Replace(p, name, "NS", 1), fi.Mode().IsDir())
				}
				return nil
			})
		}
	}
	return b.String()
}

package bpfconst

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Generate runs one bpfconst invocation: args are the command's flags
// (as written in a //go:generate line), dir the directory they are
// relative to, pkg the default package name. It returns the output path
// and the code to write there.
func Generate(args []string, dir, pkg string) (string, []byte, error) {
	fs := flag.NewFlagSet("bpfconst", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	src := fs.String("src", "", "the C source to read")
	ident := fs.String("ident", "", "bpf2go identifier stem of the program (with -enum)")
	enum := fs.String("enum", "", "drop-reason enum to export (optional)")
	defines := fs.String("define", "", "comma-separated C=Go names of integer #defines to export")
	out := fs.String("out", "", "Go file to write")
	fs.StringVar(&pkg, "pkg", pkg, "Go package name")
	if err := fs.Parse(args); err != nil {
		return "", nil, err
	}
	if *src == "" || *out == "" || pkg == "" {
		return "", nil, fmt.Errorf("need -src, -out and -pkg (or GOPACKAGE)")
	}
	path := filepath.Join(dir, *src)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	f := File{Source: sourceName(*src), Package: pkg, Ident: *ident}
	if *enum != "" {
		e, err := ParseEnum(string(b), *enum)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", *src, err)
		}
		f.Enum = &e
	}
	if *defines != "" {
		want := map[string]string{}
		for _, kv := range strings.Split(*defines, ",") {
			c, g, ok := strings.Cut(kv, "=")
			if !ok {
				return "", nil, fmt.Errorf("-define %q: want C=Go", kv)
			}
			want[c] = g
		}
		if f.Defines, err = ParseDefines(string(b), want); err != nil {
			return "", nil, fmt.Errorf("%s: %w", *src, err)
		}
	}
	code, err := Render(f)
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, *out), code, nil
}

// sourceName shows a C path from the repository root (bpf/...).
func sourceName(src string) string {
	s := filepath.ToSlash(src)
	if i := strings.LastIndex(s, "bpf/"); i >= 0 {
		return s[i:]
	}
	return s
}

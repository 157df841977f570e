// Package examples holds segchain's example domain files (see README.md) and
// embeds the default one: the thesis' Figure 3.1 network that `segchain lab
// up` and `make demo` use when no file is given.
package examples

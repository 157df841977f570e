// Package nsutil runs code inside a named network namespace. It is the only
// place segchain switches namespaces: the OS thread is locked for the
// duration and always restored, so no goroutine ever runs in the wrong
// namespace.
package nsutil

// Package proxyperf adds the SR proxies to `segchain perf`: recipes for
// End.AD, End.AS and End.AM in front of a pass-through SF, and their
// baselines (native End + the same SF as a transit hop, and stock Linux's
// End.DX6 + H.Encaps by policy route).
package proxyperf

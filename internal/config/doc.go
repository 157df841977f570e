// Package config loads segchain domain files: strict YAML (unknown keys are
// errors), defaults, and validation that reports every error at once with
// its path and line. A loaded Domain also offers the resolved view the
// planner and the lab use: interfaces with derived addresses, SIDs, node
// addresses and HMAC secrets.
package config

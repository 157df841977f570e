module github.com/segchain/segchain

go 1.26.8

require (
	github.com/spf13/cobra v1.10.2
	github.com/vishvananda/netns v0.0.5
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

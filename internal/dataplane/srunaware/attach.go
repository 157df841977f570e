package srunaware

// AttachNew attaches the installed proxy program to the interfaces of netns
// that do not have it yet (one created after the proxies, such as the
// service loop, dataplane.LoopDev). Without proxies it does nothing.
func AttachNew(netns string) error {
	if !installed(netns) {
		return nil
	}
	return withNode(netns, func(n *Node) error { return n.attachAll() })
}

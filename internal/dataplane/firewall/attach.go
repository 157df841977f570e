package firewall

// AttachNew attaches the installed firewall program to the interfaces of
// netns that do not have it yet (one created after the firewalls, such as
// the service loop, dataplane.LoopDev). Without firewalls it does nothing.
func AttachNew(netns string) error {
	return state.Do(netns, (*Node).attachAll)
}

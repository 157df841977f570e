package journal

import (
	"time"

	"github.com/segchain/segchain/internal/nodelock"
)

// SetWho names who the journals opened from now on were written for: a
// controller across the wire (the agent writes its node's journal on the
// controller's behalf, server.Server), instead of this process.
func (d *Disk) SetWho(who string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.me = nodelock.Holder{Command: who, Since: time.Now()}
}

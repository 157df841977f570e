package srv6svc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (uapi linux/ethtool.h).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRx, MaxTx, MaxOther, MaxCombined         uint32
	RxCount, TxCount, OtherCount, CombinedCount uint32
}

const ethtoolGChannels = 0x3c // ETHTOOL_GCHANNELS

// rxQueues returns how many receive queues iface really uses (ethtool -l:
// rx + combined), 1 when the driver does not say. An AF_XDP socket can
// bind only to those, whatever the device was allocated with.
func rxQueues(iface string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{Cmd: ethtoolGChannels}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], iface)
	ifr.data = uintptr(unsafe.Pointer(&ch))
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 1
	}
	n := int(ch.RxCount + ch.CombinedCount)
	if n < 1 {
		return 1
	}
	return n
}

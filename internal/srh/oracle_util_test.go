package srh

import (
	"strings"
	"time"

	"github.com/gopacket/gopacket"
)

func captureInfo(n int) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: n, Length: n}
}

// normTshark normalises tshark's field rendering (flags as 0x.., tag as
// bytes "4242" or "42:42") to the form the test builds.
func normTshark(line string) string {
	parts := strings.Split(line, ";")
	if len(parts) > 4 {
		parts[4] = strings.ReplaceAll(parts[4], ":", "")
	}
	return strings.Join(parts, ";")
}

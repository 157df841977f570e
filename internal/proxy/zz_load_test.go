package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

func TestLoadQuick(t *testing.T) {
	var objs proxyTCObjects
	if err := loadProxyTCObjects(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			n := len(ve.Log)
			s := 0
			if n > 45 {
				s = n - 45
			}
			t.Fatalf("%s", strings.Join(ve.Log[s:], "\n"))
		}
		t.Fatal(err)
	}
	objs.Close()
}

func TestDropNames(t *testing.T) {
	if len(dropNames) != numDropReasons {
		t.Fatalf("dropNames has %d names, enum has %d", len(dropNames), numDropReasons)
	}
}

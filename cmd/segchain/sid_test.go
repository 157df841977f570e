package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/localsid"
)

func TestSidCheckFeatures(t *testing.T) {
	noVRF := dataplane.Features{
		VRF:       dataplane.Feature{Name: "vrf", Reason: "no vrf link kind"},
		EndDT4:    dataplane.Feature{Name: "End.DT4", Reason: "EINVAL"},
		EndDT46:   dataplane.Feature{Name: "End.DT46", Reason: "EINVAL"},
		VRFTable:  dataplane.Feature{Name: "vrftable", Reason: "EINVAL"},
		FlavorPSP: dataplane.Feature{Name: "flavor psp", Supported: true},
	}
	tests := []struct {
		name      string
		args      string
		wantErr   string // "" = no error
		wantProbe bool
	}{
		{"End needs nothing probed", "fc00::1 End", "", false},
		{"End.DT4 names VRF", "fc00::1 End.DT4 vrftable 10", "End.DT4 needs VRF devices", true},
		{"End.DT46 names VRF", "fc00::1 End.DT46 vrftable 10", "End.DT46 needs VRF devices", true},
		{"vrftable on End.DT6", "fc00::1 End.DT6 vrftable 10", "needs VRF devices (vrftable)", true},
		{"End.DT6 table ok", "fc00::1 End.DT6 table 10", "", false},
		{"psp supported", "fc00::1 End flavors psp", "", true},
		{"usp never", "fc00::1 End flavors usp", "implements only psp and next-csid", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := localsid.Parse(strings.Fields(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			probed := false
			err = checkFeatures(func() dataplane.Features { probed = true; return noVRF }, r.Seg6Local)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkFeatures(%q) = %v, want nil", tt.args, err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("checkFeatures(%q) = %v, want %q", tt.args, err, tt.wantErr)
				}
				if !errors.Is(err, dataplane.ErrNotSupported) {
					t.Errorf("checkFeatures(%q) = %v, does not wrap ErrNotSupported", tt.args, err)
				}
			}
			if probed != tt.wantProbe {
				t.Errorf("probed = %v, want %v", probed, tt.wantProbe)
			}
		})
	}
}

package svcflags_test

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/svcflags"
)

func parse(t *testing.T, args ...string) (srv6svc.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f svcflags.Flags
	f.Register(fs, "t")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Config()
}

func TestConfig(t *testing.T) {
	cfg, err := parse(t, "--sid", "fc00:5::100,fc00:6::/112", "--dev", "eth0", "--on-failure", "bypass", "--netns", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.SIDs) != 2 || cfg.SIDs[0] != netip.MustParsePrefix("fc00:5::100/128") || cfg.OnFailure != srv6svc.OnFailureBypass ||
		cfg.Netns != "n1" || cfg.Name != "t" || cfg.Interfaces[0] != "eth0" {
		t.Errorf("%+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := parse(t, "--sid", "nope", "--on-failure", "maybe")
	var ce *srv6svc.ConfigError
	if !errors.Is(err, srv6svc.ErrConfig) || !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Errorf("every problem, typed: %v", err)
	}
}

func TestConfigUSID(t *testing.T) {
	cfg, err := parse(t, "--sid", "fcbb:bb00:2a1::/48", "--usid", "f3216", "--dev", "eth0")
	if err != nil || cfg.CSID != srv6svc.F3216 {
		t.Errorf("--usid f3216: %+v, %v", cfg.CSID, err)
	}
	if cfg, err = parse(t, "--sid", "fcbb:bb00:2a1::/48", "--usid", "32/16", "--dev", "eth0"); err != nil || cfg.CSID != srv6svc.F3216 {
		t.Errorf("--usid 32/16: %+v, %v", cfg.CSID, err)
	}
	if _, err := parse(t, "--sid", "fcbb:bb00:2a1::/48", "--usid", "30/16", "--dev", "eth0"); err == nil {
		t.Error("--usid 30/16 accepted")
	}
}

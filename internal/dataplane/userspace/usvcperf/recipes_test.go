package usvcperf

import "testing"

// The IPS arm's rule set builds (its packets' path is the ids example's
// live mode, tested there through ids.ServiceScratch), and every recipe
// is registered under its documented name.
func TestRecipes(t *testing.T) {
	if _, err := ipsBatch(IDSRules); err != nil {
		t.Fatalf("IPS engine of %d synthetic rules: %v", IDSRules, err)
	}
	if _, err := sealBatch(); err != nil {
		t.Fatalf("sealer: %v", err)
	}
	want := map[string]bool{"userspace-sync": true, "userspace-batch": true, "End.ASM": true, "userspace-ids": true, "userspace-encrypt": true,
		"userspace-sync-stack": true, "userspace-batch-stack": true, "End.ASM-stack": true}
	for _, r := range Recipes() {
		delete(want, r.Name())
	}
	if len(want) != 0 {
		t.Fatalf("recipes missing: %v", want)
	}
}

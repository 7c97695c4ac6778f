package ratelimit

import "testing"

// Every twin the package carries is found in the embedded library once, by newTwins,
// and has its script's sha.
func TestEveryEmbeddedTwinIsInTheLibraryAndHasItsSha(t *testing.T) {
	fns := twinFunctions()
	if len(fns) < 10 {
		t.Fatalf("twinFunctions: %v", fns)
	}
	tw := newTwins(EmbeddedLua())
	for _, fn := range fns {
		if !tw.inLibrary[fn] || tw.shas[fn] == "" {
			t.Errorf("%s: in the library %v, script sha %q", fn, tw.inLibrary[fn], tw.shas[fn])
		}
	}
}

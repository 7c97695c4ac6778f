package ratelimit

import (
	"slices"
	"sort"
	"testing"
)

// twinFunctions, whose presence in the library newTwins tells once, are the twins
// the package carries: one script per function.
func TestTwinFunctionsAreTheEmbeddedScripts(t *testing.T) {
	var scripts []string
	for name := range EmbeddedLua().Scripts {
		scripts = append(scripts, name)
	}
	sort.Strings(scripts)
	listed := slices.Clone(twinFunctions)
	sort.Strings(listed)
	if !slices.Equal(scripts, listed) {
		t.Errorf("twinFunctions %v, the embedded scripts %v", listed, scripts)
	}
	tw := newTwins(EmbeddedLua())
	for _, fn := range twinFunctions {
		if !tw.inLibrary[fn] || tw.shas[fn] == "" {
			t.Errorf("%s: in the library %v, script sha %q", fn, tw.inLibrary[fn], tw.shas[fn])
		}
	}
}

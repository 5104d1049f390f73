package node

import "testing"

// Warm nodes only for versions whose "Break on start" pauses at every
// main module (nodejs/node#55679 and its backports); any other would run
// the program to its end without the entry pause.
func TestWarmNodesOnlyForVersionsThatPauseAtEveryMain(t *testing.T) {
	for v, want := range map[string]bool{
		"18.19.0": false, "20.18.3": false, "20.19.0": true, "20.20.2": true,
		"21.7.3": false, "22.12.0": false, "22.13.0": true, "23.1.0": false, "23.2.0": true,
		"24.0.0": true, "25.1.0": true, "": false, "v20.20.2": false, "twenty": false,
	} {
		if got := pausesAtEveryMain(v); got != want {
			t.Errorf("pausesAtEveryMain(%q) = %v, want %v", v, got, want)
		}
	}
}

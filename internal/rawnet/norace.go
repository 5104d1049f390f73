//go:build !race

package rawnet

const raceEnabled = false

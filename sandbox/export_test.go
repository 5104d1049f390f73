//go:build !windows

package sandbox

// BwrapOn is bwrapOn, for the tests of what other platforms answer.
var BwrapOn = bwrapOn

// Package check holds the tests that read deploy/'s compose file and
// Kubernetes manifests as their tools would, since neither can run on
// tether's CI machines: compose.yaml through compose-go (the Compose
// specification's loader and schema), each manifest strictly into its
// Kubernetes API type (an unknown or misspelt field fails), then what tether
// needs of them (probes on /readyz and /healthz, a grace period above the
// broker's bounded shutdown, selectors that match, every TETHER_* variable
// and flag one the code has).
//
// It is a module of its own so that the broker's module does not carry
// compose-go and the Kubernetes API types; scripts/deploy-check.sh runs it.
package check

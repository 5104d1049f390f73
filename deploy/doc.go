// Package deploy holds no code: it is the home of the deployment files
// (systemd units, a compose file, Kubernetes manifests, Prometheus rules)
// and of the tests that keep them true to the code, such as every metric an
// alerting rule names being one the broker exports. docs/deploy.md is
// their guide.
package deploy

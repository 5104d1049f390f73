package check

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestKubernetesManifests decodes each document of
// deploy/kubernetes/broker.yaml strictly into its API type (an unknown or
// misspelt field fails, as kubectl's field validation would) and checks
// what tether needs of them: three brokers, readiness on /readyz and
// liveness on /healthz, a grace period above the broker's bounded shutdown
// and the preStop pause, a locked-down container, selectors of the Service
// and the PodDisruptionBudget that match the pods, and only variables and
// flags tether has.
func TestKubernetesManifests(t *testing.T) {
	raw, err := os.ReadFile("../kubernetes/broker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		dep *appsv1.Deployment
		svc *corev1.Service
		pdb *policyv1.PodDisruptionBudget
		cm  *corev1.ConfigMap
	)
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch tm.Kind {
		case "":
			continue // the comment before the first document
		case "Deployment":
			dep = &appsv1.Deployment{}
			obj = dep
		case "Service":
			svc = &corev1.Service{}
			obj = svc
		case "PodDisruptionBudget":
			pdb = &policyv1.PodDisruptionBudget{}
			obj = pdb
		case "ConfigMap":
			cm = &corev1.ConfigMap{}
			obj = cm
		default:
			t.Fatalf("document %d: kind %q, which this test does not know", i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s: %v", tm.Kind, err)
		}
	}
	if dep == nil || svc == nil || pdb == nil || cm == nil {
		t.Fatalf("broker.yaml: want a Deployment, a Service, a PodDisruptionBudget and a ConfigMap")
	}

	for k := range cm.Data {
		checkEnv(t, "ConfigMap "+cm.Name, k)
	}
	pod := dep.Spec.Template
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment: replicas %v, want 3", dep.Spec.Replicas)
	}
	if !matches(dep.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("Deployment: selector %v does not match the pod's labels %v", dep.Spec.Selector.MatchLabels, pod.Labels)
	}
	if !matches(svc.Spec.Selector, pod.Labels) {
		t.Errorf("Service: selector %v does not match the pod's labels %v", svc.Spec.Selector, pod.Labels)
	}
	if pdb.Spec.Selector == nil || !matches(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("PodDisruptionBudget: its selector does not match the pod's labels %v", pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("Deployment: %d containers, want the broker alone", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "broker" {
		t.Errorf("container args %v, want tether broker …", c.Args)
	} else {
		checkArgs(t, "the Deployment's args", "broker", c.Args[1:])
	}
	for _, e := range c.Env {
		checkEnv(t, "the Deployment's env", e.Name)
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name != cm.Name {
			t.Errorf("envFrom names ConfigMap %q, the file defines %q", ef.ConfigMapRef.Name, cm.Name)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s: want an HTTPS GET of %s", what, path)
			return
		}
		if p.HTTPGet.Port.Type == intstr.String && ports[p.HTTPGet.Port.StrVal] == 0 {
			t.Errorf("%s: port %q is not a port of the container", what, p.HTTPGet.Port.StrVal)
		}
	}
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	probe("livenessProbe", c.LivenessProbe, "/healthz")
	for _, sp := range svc.Spec.Ports {
		if sp.TargetPort.Type == intstr.String && ports[sp.TargetPort.StrVal] == 0 {
			t.Errorf("Service: targetPort %q is not a port of the container", sp.TargetPort.StrVal)
		}
	}
	var pause int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		pause = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g <= brokerShutdownBound+pause {
		t.Errorf("terminationGracePeriodSeconds %s, want more than the broker's %d s shutdown bound plus the %d s preStop pause", fmtInt(g), brokerShutdownBound, pause)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext: want a read-only root, no privilege escalation and every capability dropped")
	}
	if psc := pod.Spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext: want runAsNonRoot as 65532, the image's user")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container resources: want a CPU request and a memory limit")
	}
	if !strings.HasPrefix(c.Image, "localhost/tether:") {
		t.Errorf("container image %q, want the shape make image builds (localhost/tether:VERSION)", c.Image)
	}
}

func fmtInt(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}

// matches reports whether every label of sel is in labels.
func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

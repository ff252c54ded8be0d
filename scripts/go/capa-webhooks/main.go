// capa-webhooks serves Cluster API Provider AWS's own admission webhooks (validating and
// defaulting) for the kinds sweeper reads and writes, built from CAPA's Go module at the version
// go.mod pins, and registers them with the test API server the way CAPA's install does: CAPA's
// generated config/webhook/manifests.yaml, filtered to the kinds served here, each clientConfig
// pointed at this process. Cluster API's webhook for Cluster is served the same way.
//
// It exists so that the tests write through the admission CAPA's users run: an update CAPA's
// webhook refuses is refused in the tests too.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	ekscontrolplanev1 "sigs.k8s.io/cluster-api-provider-aws/v2/controlplane/eks/api/v1beta2"
	ekswebhooks "sigs.k8s.io/cluster-api-provider-aws/v2/controlplane/eks/webhooks"
	"sigs.k8s.io/cluster-api-provider-aws/v2/feature"
	capawebhooks "sigs.k8s.io/cluster-api-provider-aws/v2/webhooks"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiwebhooks "sigs.k8s.io/cluster-api/webhooks"
)

// The kinds served, by the lower-case kind that ends each webhook path
// (/validate-<group>-<version>-<kind>). AWSManagedCluster has no webhook in CAPA.
var capaKinds = map[string]func(ctrl.Manager) error{
	"awscluster":                   (&capawebhooks.AWSCluster{}).SetupWebhookWithManager,
	"awsclustercontrolleridentity": (&capawebhooks.AWSClusterControllerIdentity{}).SetupWebhookWithManager,
	"awsclusterroleidentity":       (&capawebhooks.AWSClusterRoleIdentity{}).SetupWebhookWithManager,
	"awsclusterstaticidentity":     (&capawebhooks.AWSClusterStaticIdentity{}).SetupWebhookWithManager,
	"awsmanagedcontrolplane":       (&ekswebhooks.AWSManagedControlPlane{}).SetupWebhookWithManager,
}

func main() {
	var (
		host, certDir, caFile, capaManifests, capiManifests, gates string
		port                                                       int
	)
	flag.StringVar(&host, "host", "127.0.0.1", "address to serve on")
	flag.IntVar(&port, "port", 29443, "port to serve on")
	flag.StringVar(&certDir, "cert-dir", "", "directory with tls.crt and tls.key (a cert for --host)")
	flag.StringVar(&caFile, "ca-file", "", "the CA that signed tls.crt: the webhook configurations' caBundle")
	flag.StringVar(&capaManifests, "capa-manifests", "", "CAPA's config/webhook/manifests.yaml")
	flag.StringVar(&capiManifests, "capi-manifests", "", "Cluster API's config/webhook/manifests.yaml (optional)")
	// CAPA's manager takes its feature gates with this flag and its webhooks read them (the
	// AWSCluster webhook forbids spec.s3Bucket unless BootstrapFormatIgnition is on).
	flag.StringVar(&gates, "feature-gates", "", "CAPA's feature gates, as its manager's --feature-gates (A=true,B=false)")
	flag.Parse()
	if err := feature.MutableGates.Set(gates); err != nil {
		fmt.Fprintln(os.Stderr, "capa-webhooks: --feature-gates:", err)
		os.Exit(1)
	}
	if err := run(host, port, certDir, caFile, capaManifests, capiManifests); err != nil {
		fmt.Fprintln(os.Stderr, "capa-webhooks:", err)
		os.Exit(1)
	}
}

func run(host string, port int, certDir, caFile, capaManifests, capiManifests string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("read --ca-file: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, infrav1.AddToScheme, ekscontrolplanev1.AddToScheme, clusterv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir}),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	for kind, setup := range capaKinds {
		if err := setup(mgr); err != nil {
			return fmt.Errorf("webhook for %s: %w", kind, err)
		}
	}
	served := map[string]bool{}
	for k := range capaKinds {
		served[k] = true
	}
	if capiManifests != "" {
		// Cluster API's Cluster webhook, as its manager sets it up (topology checks read
		// ClusterClasses through the manager's client; no cluster cache is needed for them).
		if err := (&capiwebhooks.Cluster{Client: mgr.GetClient()}).SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("webhook for Cluster: %w", err)
		}
		served["cluster"] = true
	}
	errs := make(chan error, 1)
	go func() { errs <- mgr.Start(ctx) }()
	// Register only once the server answers, so no admission request meets a closed port.
	started := mgr.GetWebhookServer().StartedChecker()
	for i := 0; started(nil) != nil; i++ {
		if i == 100 {
			return fmt.Errorf("webhook server did not start: %w", started(nil))
		}
		select {
		case e := <-errs:
			return fmt.Errorf("manager stopped: %w", e)
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	base := fmt.Sprintf("https://%s:%d", host, port)
	for prefix, file := range map[string]string{"capa-": capaManifests, "capi-": capiManifests} {
		if file == "" {
			continue
		}
		if err := register(ctx, c, file, prefix, base, ca, served); err != nil {
			return err
		}
	}
	fmt.Println("capa-webhooks: serving on", base)
	return <-errs
}

// register creates or replaces the webhook configurations of one manifests file, named with the
// prefix the project's kustomize config adds, keeping only the webhooks of the served kinds.
func register(ctx context.Context, c client.Client, file, prefix, base string, ca []byte, served map[string]bool) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", filepath.Base(file), err)
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if len(doc) == 0 || string(doc) == "null" || json.Unmarshal(doc, &head) != nil {
			continue
		}
		var obj, existing client.Object
		switch head.Kind {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := json.Unmarshal(doc, &m); err != nil {
				return err
			}
			m.Webhooks = keep(m.Webhooks, func(w *admissionv1.MutatingWebhook) (*admissionv1.WebhookClientConfig, **metav1.LabelSelector) {
				return &w.ClientConfig, &w.ObjectSelector
			}, base, ca, served)
			obj, existing = &m, &admissionv1.MutatingWebhookConfiguration{}
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := json.Unmarshal(doc, &v); err != nil {
				return err
			}
			v.Webhooks = keep(v.Webhooks, func(w *admissionv1.ValidatingWebhook) (*admissionv1.WebhookClientConfig, **metav1.LabelSelector) {
				return &w.ClientConfig, &w.ObjectSelector
			}, base, ca, served)
			obj, existing = &v, &admissionv1.ValidatingWebhookConfiguration{}
		default:
			continue
		}
		obj.SetName(prefix + obj.GetName())
		if err := apply(ctx, c, obj, existing); err != nil {
			return err
		}
	}
}

// keep returns the webhooks of the served kinds (mutating and validating alike: fields names
// the clientConfig and objectSelector of one), each pointed at this process and given the bypass
// selector.
func keep[W any](ws []W, fields func(*W) (*admissionv1.WebhookClientConfig, **metav1.LabelSelector),
	base string, ca []byte, served map[string]bool) []W {
	kept := ws[:0]
	for i := range ws {
		cc, selector := fields(&ws[i])
		*selector = bypass()
		if point(cc, base, ca, served) {
			kept = append(kept, ws[i])
		}
	}
	return kept
}

// BypassLabel marks an object a test must create as if before CAPA's webhook was installed (or
// while it was down): the one way a malformed AWSCluster exists on a real management cluster, and
// what the bad-input tests need. CAPA's own configuration has no selector; every object without
// this label (every other object of every test) goes through CAPA's admission.
const BypassLabel = "sweeper.dev/test-created-before-capa-webhook"

func bypass() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: BypassLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
}

// point aims a webhook's clientConfig at this process when its kind is served here.
func point(cc *admissionv1.WebhookClientConfig, base string, ca []byte, served map[string]bool) bool {
	if cc.Service == nil || cc.Service.Path == nil {
		return false
	}
	path := *cc.Service.Path
	kind := path[strings.LastIndex(path, "-")+1:]
	if !served[kind] {
		return false
	}
	url := base + path
	*cc = admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
	return true
}

func apply(ctx context.Context, c client.Client, obj client.Object, existing client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, obj)
	case err != nil:
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}

// capa-manager runs Cluster API Provider AWS's own AWSCluster controller, built from CAPA's Go
// module at the version go.mod pins, against the test API server and LocalStack: what CAPA's
// manager (its main.go) wires for an AWSCluster and nothing else. The AWSCluster reconciler with
// its gates (ExternalResourceGC, AlternativeGCStrategy, TagUnmanagedNetworkResources), the
// controller identity creator, CAPA's service-endpoint overrides and its event recorder.
//
// It exists so that the tests meet the infrastructure CAPA itself builds (names, tags, structure)
// and CAPA's own delete, instead of the project's reconstruction of them. No AWSMachine, machine
// pool, EKS or ROSA controller runs: the tests' clusters have no machines.
//
// Scoped to one namespace (--namespace): every test runs its own manager, with its own LocalStack
// account in AWS_ACCESS_KEY_ID, and must not reconcile another test's AWSClusters.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	infrav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
	"sigs.k8s.io/cluster-api-provider-aws/v2/controllers"
	ekscontrolplanev1 "sigs.k8s.io/cluster-api-provider-aws/v2/controlplane/eks/api/v1beta2"
	"sigs.k8s.io/cluster-api-provider-aws/v2/exp/controlleridentitycreator"
	"sigs.k8s.io/cluster-api-provider-aws/v2/feature"
	"sigs.k8s.io/cluster-api-provider-aws/v2/pkg/cloud/endpoints"
	"sigs.k8s.io/cluster-api-provider-aws/v2/pkg/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func main() {
	var (
		namespace, gates, serviceEndpoints, metricsAddr, healthAddr, crds string
		syncPeriod                                                        time.Duration
	)
	flag.StringVar(&namespace, "namespace", "", "the one namespace whose AWSClusters are reconciled (required)")
	flag.StringVar(&gates, "feature-gates", "", "CAPA's feature gates, as its --feature-gates: ExternalResourceGC=false,...")
	flag.StringVar(&serviceEndpoints, "service-endpoints", "", "CAPA's --service-endpoints: region:ec2=URL,elasticloadbalancing=URL,...")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "metrics address (0: off)")
	flag.StringVar(&healthAddr, "health-addr", "0", "health probe address (0: off)")
	flag.DurationVar(&syncPeriod, "sync-period", 10*time.Minute, "CAPA's --sync-period")
	flag.StringVar(&crds, "crds", "", "CRD files (comma-separated) created at start when missing: CAPA's AWSMachine, which its AWSCluster delete lists")
	flag.Parse()
	if err := installCRDs(crds); err != nil {
		fmt.Fprintln(os.Stderr, "capa-manager:", err)
		os.Exit(1)
	}
	if err := run(namespace, gates, serviceEndpoints, metricsAddr, healthAddr, syncPeriod); err != nil {
		fmt.Fprintln(os.Stderr, "capa-manager:", err)
		os.Exit(1)
	}
}

func run(namespace, gates, serviceEndpoints, metricsAddr, healthAddr string, syncPeriod time.Duration) error {
	if namespace == "" {
		return fmt.Errorf("--namespace is required: a manager reconciles one test's AWSClusters only")
	}
	if err := feature.MutableGates.Set(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	// As CAPA's main.go: the overrides are package state its clients' endpoint resolvers read.
	if err := endpoints.ParseFlag(serviceEndpoints); err != nil {
		return fmt.Errorf("--service-endpoints: %w", err)
	}
	ctrl.SetLogger(klog.Background())
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, infrav1.AddToScheme, ekscontrolplanev1.AddToScheme, clusterv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.UserAgent = "cluster-api-provider-aws-controller"
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: healthAddr,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			SyncPeriod:        &syncPeriod,
		},
		// A static identity's Secret is in CAPA's own namespace (POD_NAMESPACE, default
		// capa-system), outside the one namespace cached: read it from the API server.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	record.InitFromRecorder(mgr.GetEventRecorderFor("aws-controller"))
	ctx := ctrl.SetupSignalHandler()
	gc := feature.Gates.Enabled(feature.ExternalResourceGC)
	fmt.Printf("capa-manager: namespace %s, feature gates %v\n", namespace, feature.Gates)
	opts := controller.Options{MaxConcurrentReconciles: 5, RecoverPanic: ptr.To(true)}
	// The same fields CAPA's setupReconcilersAndWebhooks gives it (maxWaitActiveUpdateDelete: its default).
	if err := (&controllers.AWSClusterReconciler{
		Client:                       mgr.GetClient(),
		Recorder:                     mgr.GetEventRecorderFor("awscluster-controller"),
		ExternalResourceGC:           gc,
		AlternativeGCStrategy:        gc && feature.Gates.Enabled(feature.AlternativeGCStrategy),
		TagUnmanagedNetworkResources: feature.Gates.Enabled(feature.TagUnmanagedNetworkResources),
		MaxWaitActiveUpdateDelete:    30 * time.Minute,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("AWSCluster controller: %w", err)
	}
	if feature.Gates.Enabled(feature.AutoControllerIdentityCreator) {
		if err := (&controlleridentitycreator.AWSControllerIdentityReconciler{
			Client: mgr.GetClient(),
			Log:    ctrl.Log.WithName("controllers").WithName("AWSControllerIdentity"),
		}).SetupWithManager(ctx, mgr, opts); err != nil {
			return fmt.Errorf("AWSControllerIdentity controller: %w", err)
		}
	}
	return mgr.Start(ctx)
}

// installCRDs creates each CRD of the files that the API server does not have yet, and waits
// until it is established. CAPA's AWSCluster delete counts the cluster's AWSMachines first and
// fails while their kind is unknown; the environment installs only the kinds sweeper reads.
func installCRDs(files string) error {
	if files == "" {
		return nil
	}
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, file := range strings.Split(files, ",") {
		raw, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
		for i := 0; ; i++ {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			if established(conds) {
				break
			}
			if i == 100 {
				return fmt.Errorf("CRD %s not established", crd.GetName())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(conds []interface{}) bool {
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

//go:build tools

// Package tools pins the commands scripts/provision-kubernetes.sh builds: go.mod and go.sum hold
// exactly what they need. Never compiled (the build tag is never set).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
